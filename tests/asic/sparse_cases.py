"""Sparse COO and CSR operations, each written once and run on any device.

Each case is ``name -> fn(device) -> Tensor``: it builds its inputs on the CPU
from fixed values, moves them to ``device``, runs the operation there and
returns the result (sparse or dense). Running a case on "cpu" and on
"my_asic" and comparing checks my_asic's sparse layouts against PyTorch's CPU
sparse kernels.

Shared by test_sparse.py in process (host-addressable memory) and in a
subprocess with MY_ASIC_HOST_ADDRESSABLE=0, which imports this module by path.
"""

import torch

import op_cases


def _dense(device):
    """A 4×5 float32 matrix with zeros in most places."""
    d = torch.zeros(4, 5)
    d[0, 1], d[1, 0], d[1, 4], d[3, 2], d[3, 3] = 1.5, -2.0, 3.25, 0.5, -1.0
    return d.to(device)


def _uncoalesced(device):
    """A 3×4 COO tensor with a repeated index (0, 1) and unsorted entries."""
    indices = torch.tensor([[2, 0, 1, 0], [3, 1, 0, 1]])
    values = torch.tensor([4.0, 1.0, 2.0, 10.0])
    return torch.sparse_coo_tensor(indices, values, (3, 4), device=device)


def _rhs(device, rows=5, cols=3):
    return torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols).div(7).to(device)


def _sparse_mm_backward(device):
    dense = _rhs(device).requires_grad_()
    torch.sparse.mm(_dense(device).to_sparse(), dense).pow(2).sum().backward()
    return dense.grad


def _sparse_mm_reduce_backward(device, reduce):
    # amax/amin save the argmax in the forward only when an input requires grad.
    csr = _dense(device).to_sparse_csr().requires_grad_()
    dense = _rhs(device).requires_grad_()
    torch.sparse.mm(csr, dense, reduce).sum().backward()
    return dense.grad


CASES = {
    "sparse_coo_tensor": lambda d: _uncoalesced(d),
    "to_sparse": lambda d: _dense(d).to_sparse(),
    "to_sparse_csr": lambda d: _dense(d).to_sparse_csr(),
    "coo_to_dense": lambda d: _uncoalesced(d).to_dense(),
    "csr_to_dense": lambda d: _dense(d).to_sparse_csr().to_dense(),
    "csr_to_coo": lambda d: _dense(d).to_sparse_csr().to_sparse(),
    "coalesce": lambda d: _uncoalesced(d).coalesce(),
    "coalesced_indices": lambda d: _uncoalesced(d).coalesce().indices(),
    "coalesced_values": lambda d: _uncoalesced(d).coalesce().values(),
    "sparse_mm": lambda d: torch.sparse.mm(_dense(d).to_sparse(), _rhs(d)),
    "coo_matmul": lambda d: _dense(d).to_sparse() @ _rhs(d),
    "addmm": lambda d: torch.addmm(torch.ones(4, 3, device=d), _dense(d).to_sparse(), _rhs(d), beta=0.5, alpha=2.0),
    "sparse_addmm": lambda d: torch.sparse.addmm(torch.ones(4, 3, device=d), _dense(d).to_sparse(), _rhs(d)),
    "csr_matmul": lambda d: _dense(d).to_sparse_csr() @ _rhs(d),
    "csr_addmm": lambda d: torch.addmm(torch.ones(4, 3, device=d), _dense(d).to_sparse_csr(), _rhs(d)),
    "sum": lambda d: torch.sparse.sum(_uncoalesced(d)),
    "sum_dim": lambda d: torch.sparse.sum(_uncoalesced(d), dim=1),
    "add_sparse_sparse": lambda d: _uncoalesced(d) + _uncoalesced(d).mul(3),
    "add_dense_sparse": lambda d: torch.ones(3, 4, device=d) + _uncoalesced(d),
    "add_in_place_dense": lambda d: torch.ones(3, 4, device=d).add_(_uncoalesced(d), alpha=2),
    "add_csr_csr": lambda d: _dense(d).to_sparse_csr() + _dense(d).mul(2).to_sparse_csr(),
    "mul_scalar": lambda d: _uncoalesced(d) * 2.5,
    "transpose": lambda d: _uncoalesced(d).t(),
    "sparse_mm_backward": _sparse_mm_backward,
    "sparse_mm_reduce_amax_backward": lambda d: _sparse_mm_reduce_backward(d, "amax"),
    "sparse_mm_reduce_mean_backward": lambda d: _sparse_mm_reduce_backward(d, "mean"),
}


def _as_comparable(t):
    """(layout, dense CPU values) of a sparse or dense result."""
    t = t.detach().cpu()
    return t.layout, (t.to_dense() if t.layout != torch.strided else t)


def mismatch(expected, actual):
    """Why ``actual`` differs from ``expected`` (CPU), or None if it matches: same
    layout, dtype and shape, values to 1e-5."""
    e_layout, e = _as_comparable(expected)
    a_layout, a = _as_comparable(actual)
    if a_layout != e_layout:
        return f"layout {a_layout}, expected {e_layout}"
    if a.dtype != e.dtype or a.shape != e.shape:
        return f"got {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
    same = torch.allclose(a, e, rtol=1e-5, atol=1e-5) if e.is_floating_point() else torch.equal(a, e)
    if not same:
        return f"values differ: got {a.flatten()[:8].tolist()}, expected {e.flatten()[:8].tolist()}"
    return None


def run_case_on(name, device):
    """Runs case ``name`` on ``device``; returns (result on device, why it differs from CPU or None)."""
    return op_cases.run_case_on(name, device, CASES, mismatch)


def report_all_cases(device):
    """Runs every case on ``device`` and prints {name: problem or None} as JSON (subprocess use)."""
    op_cases.report_all_cases(device, CASES, mismatch)
