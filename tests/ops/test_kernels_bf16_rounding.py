"""bfloat16 outputs are rounded exactly as torch rounds them, lane by lane, at every ISA level.

The avx512_bf16 level rounds with vcvtne2ps2bf16, which treats denormal inputs
as zero and rewrites NaNs; vectors holding such lanes must take exact rounding
instead. Each test builds inputs whose float result is known exactly (so the
only rounding is the final float -> bfloat16 one) and scatters special lanes —
denormal results, ties, values that round up to infinity, infinities, NaN —
over the first vector, the middle of a row and the scalar tail, then compares
the bits with torch's own conversion of the same float values. NaN lanes are
compared as NaN: torch's vectorised conversion writes 0xFFFF, its scalar one
0x7FC0 (what the kernels write).
"""

import pytest
import torch

WIDTH = 4096 + 37  # whole vectors of every level, then a tail
ROWS = 3


@pytest.fixture(params=[False, True], ids=["cached-stores", "streaming-stores"])
def store_kind(request):
    """Both store paths: ordinary stores, and non-temporal ones (threshold lowered to 0 bytes)."""
    from kernel_pytorch import _C

    if request.param:
        _C._kp_set_streaming_stores_min_bytes(0)
    try:
        yield request.param
    finally:
        _C._kp_set_streaming_stores_min_bytes(-1)


def bf16(values):
    return torch.tensor(values, dtype=torch.float64).to(torch.float32).to(torch.bfloat16)


def bf16_from_bits(bits):
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def scatter(base, special, positions):
    """``base`` [ROWS, WIDTH] with ``special`` (a 1-d tensor) written from each of ``positions`` on in every row."""
    out = base.clone()
    for p in positions:
        n = min(len(special), WIDTH - p)
        out[:, p:p + n] = special[:n]
    return out


# Where the special lanes go: the first vector, straddling a 32-element group,
# the middle, and the scalar tail.
POSITIONS = (0, 27, 2051, WIDTH - 20)


def assert_same_bits(actual, expected):
    assert actual.dtype == expected.dtype == torch.bfloat16
    nan = torch.isnan(expected)
    assert torch.equal(torch.isnan(actual), nan), "NaN lanes differ"
    a, e = actual[~nan].view(torch.int16), expected[~nan].view(torch.int16)
    wrong = (a != e).nonzero().flatten()
    assert wrong.numel() == 0, (
        f"{wrong.numel()} lanes differ; first: got {actual[~nan][wrong[:4]].tolist()} "
        f"(bits {[hex(v & 0xFFFF) for v in a[wrong[:4]].tolist()]}), "
        f"expected {expected[~nan][wrong[:4]].tolist()} (bits {[hex(v & 0xFFFF) for v in e[wrong[:4]].tolist()]})")


def test_sums_of_fused_add_rms_norm_round_like_torch(cpu_isa, store_kind):
    """new_residual = bf16(float(x) + float(r)): ties, denormal sums, overflow to inf, inf - inf, NaN."""
    g = torch.Generator().manual_seed(0)
    # Random operands within 2^8 of each other: the float sums are exact and
    # most need rounding (ties included).
    x = (torch.randn(ROWS, WIDTH, generator=g) * 4).bfloat16()
    r = (torch.randn(ROWS, WIDTH, generator=g) / 64).bfloat16()
    tiny = 2.0 ** -126
    special_x = bf16([1.0, 1.0078125, 3 * 2.0 ** -133, tiny, -tiny, 2.0 ** -127, 3.3895314e38,
                      float("inf"), float("inf"), float("nan"), 5.0, -0.0, 2.0 ** -133, 1.5 * 2.0 ** -126])
    special_r = bf16([2.0 ** -8, 2.0 ** -8, 5 * 2.0 ** -133, -2.0 ** -127, 2.0 ** -133, 2.0 ** -128, 3.3895314e38,
                      float("-inf"), 1.0, 1.0, float("nan"), -0.0, -2.0 ** -133, -2.0 ** -126])
    x = scatter(x, special_x, POSITIONS)
    r = scatter(r, special_r, POSITIONS)
    w = torch.ones(WIDTH, dtype=torch.bfloat16)
    _, new_residual = torch.ops.kernel_pytorch.fused_add_rms_norm(x, r, w, 1e-6)
    expected = (x.float() + r.float()).to(torch.bfloat16)
    assert (expected.view(torch.int16) & 0x7F80 == 0).logical_and(expected != 0).any(), "no denormal sums"
    assert torch.isinf(expected).any() and torch.isnan(expected).any()
    assert_same_bits(new_residual, expected)


def gated_case(g):
    """(gate, up) whose silu(gate) * up is exact in float: silu(gate) = gate / 2 for |gate| < 2^-40
    (exp(-gate) rounds to 1) and = gate for gate > 2^40 (exp(-gate) is negligible)."""
    # Tiny gates (denormal ones included) times up values scaled so that the
    # 16-bit products land over the whole bfloat16 range, denormals included.
    gate = torch.ldexp(torch.rand(ROWS, WIDTH, generator=g) + 1, torch.randint(-140, -42, (ROWS, WIDTH), generator=g))
    up = torch.ldexp(torch.rand(ROWS, WIDTH, generator=g) + 1, torch.randint(-12, 40, (ROWS, WIDTH), generator=g))
    gate, up = gate.bfloat16(), up.bfloat16()
    special_gate = bf16([3 * 2.0 ** -133, 5 * 2.0 ** -133, 2.0 ** -133, 1.75 * 2.0 ** 64, 2.0 ** 100, 2.0 ** -60,
                         float("nan"), 2.0 ** -50, float("inf"), -2.0 ** -100, 1.75 * 2.0 ** 64])
    special_up = bf16([1.0, 1.0, -1.0, 1.140625 * 2.0 ** 63, 2.0 ** 100, 1.5 * 2.0 ** -70,
                       1.0, float("inf"), 1.0, -3.0, -1.140625 * 2.0 ** 63])
    gate = scatter(gate, special_gate, POSITIONS)
    up = scatter(up, special_up, POSITIONS)
    gd = gate.double()
    silu = torch.where(gd.abs() > 2.0 ** 40, gd, gd / 2)
    # The float product is exact; torch rounds it to bfloat16.
    expected = (silu * up.double()).to(torch.float32).to(torch.bfloat16)
    return torch.cat([gate, up], dim=-1), expected


def test_silu_and_mul_rounds_like_torch(cpu_isa, store_kind):
    """silu(gate) * up with exact float products: denormal results and inputs, ties, rounding up to inf."""
    x, expected = gated_case(torch.Generator().manual_seed(1))
    e16 = expected.view(torch.int16)
    assert ((e16 & 0x7F80) == 0).logical_and(expected != 0).sum() > 100, "too few denormal results"
    assert torch.isinf(expected).any() and torch.isnan(expected).any()
    assert_same_bits(torch.ops.kernel_pytorch.silu_and_mul(x), expected)


def test_silu_of_denormal_and_tiny_inputs_rounds_like_torch(cpu_isa, store_kind):
    """silu(x) = x / 2 exactly for tiny x: ties at the denormal step round to even, as in F.silu."""
    g = torch.Generator().manual_seed(2)
    x = torch.ldexp(torch.rand(ROWS, WIDTH, generator=g) + 1,
                    torch.randint(-140, -60, (ROWS, WIDTH), generator=g)).bfloat16()
    x = x * torch.where(torch.rand(ROWS, WIDTH, generator=g) < 0.5, -1, 1).bfloat16()
    x = scatter(x, bf16([3 * 2.0 ** -133, -3 * 2.0 ** -133, 2.0 ** -133, float("nan"), 0.0]), POSITIONS)
    expected = (x.double() / 2).to(torch.float32).to(torch.bfloat16)
    assert_same_bits(torch.ops.kernel_pytorch.silu(x), expected)
    assert_same_bits(torch.nn.functional.silu(x), expected)  # torch itself agrees


def test_rms_norm_keeps_denormal_and_nan_weights(cpu_isa, store_kind):
    """Rows of +-1 with eps = 0 have rms 1, so out = x * w exactly: denormal weights stay denormal."""
    g = torch.Generator().manual_seed(3)
    x = torch.where(torch.rand(ROWS, WIDTH, generator=g) < 0.5, -1.0, 1.0).bfloat16()
    w = torch.ldexp(torch.rand(WIDTH, generator=g) + 1, torch.randint(-133, -110, (WIDTH,), generator=g)).bfloat16()
    w = scatter(w.unsqueeze(0), bf16([2.0 ** -133, float("nan"), float("inf"), 3 * 2.0 ** -133]), POSITIONS)[0]
    expected = (x.float() * w.float()).to(torch.bfloat16)
    assert_same_bits(torch.ops.kernel_pytorch.rms_norm(x, w, 0.0), expected)


def one_hot(k, j, value):
    x = torch.zeros(k, dtype=torch.bfloat16)
    x[j] = value
    return x


def test_matmul_vec_keeps_products_of_denormal_x(cpu_isa):
    """x holding a denormal (which vdpbf16ps would read as zero): out = w[:, j] * x[j], exact in float, rounded as
    torch does."""
    g = torch.Generator().manual_seed(5)
    w = (torch.rand(37, WIDTH, generator=g) + 1).bfloat16()  # 8 significant bits: the products are exact in float
    for j in (0, 33, WIDTH - 5):
        x = one_hot(WIDTH, j, bf16([3 * 2.0 ** -133])[0])
        expected = (w[:, j].double() * x[j].double()).to(torch.float32).to(torch.bfloat16)
        assert (expected != 0).all()
        assert_same_bits(torch.ops.kernel_pytorch.matmul_vec(w, x), expected)


def test_matmul_vec_keeps_denormal_weights_and_denormal_products(cpu_isa):
    """Rows of denormal weights (times 1) and of tiny weights whose products with x are denormal (vdpbf16ps would
    flush both to zero) keep their exact products; every third row is of ordinary weights."""
    g = torch.Generator().manual_seed(6)
    n = 41
    normal = (torch.rand(n, WIDTH, generator=g) + 1).bfloat16()
    denormal = torch.ldexp(torch.rand(n, WIDTH, generator=g) + 1,
                           torch.randint(-133, -127, (n, WIDTH), generator=g)).bfloat16()
    tiny = torch.ldexp(torch.rand(n, WIDTH, generator=g) + 1, torch.full((n, WIDTH), -70)).bfloat16()
    rows = torch.arange(n).unsqueeze(1)
    for small, x_value in ((denormal, 1.0), (tiny, 2.0 ** -60)):
        w = torch.where(rows % 3 == 0, normal, small)  # every third row normal
        for j in (0, 2051, WIDTH - 20):
            x = one_hot(WIDTH, j, x_value)
            expected = (w[:, j].double() * x_value).to(torch.float32).to(torch.bfloat16)
            assert ((expected.view(torch.int16) & 0x7F80) == 0).logical_and(expected != 0).sum() >= n // 2
            assert_same_bits(torch.ops.kernel_pytorch.matmul_vec(w, x), expected)
