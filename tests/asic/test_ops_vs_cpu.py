"""Common ATen ops give the same results on my_asic as on the CPU.

Two sweeps: our own list of ~50 ops (op_cases.py), and a slice of PyTorch's
OpInfo database, whose sample inputs cover broadcasting, scalars, empty and
non-contiguous tensors and keyword arguments we would not think to write.
"""

import pytest
import torch

from op_cases import CASES, mismatch, run_case_on

pytestmark = pytest.mark.usefixtures("device_count")


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_cpu(name):
    actual, problem = run_case_on(name, "my_asic")
    assert actual.device.type == "my_asic"
    assert problem is None, f"{name}: {problem}"


# A handful of OpInfo entries across op families: binary with broadcasting,
# unary, reductions with dim/keepdim, matmul, shape ops, indexing, softmax.
OPINFO_NAMES = [
    "add", "mul", "abs", "sigmoid", "sum", "amax", "mean",
    "matmul", "cat", "where", "index_select", "softmax", "cumsum", "clamp",
]  # fmt: skip
MAX_SAMPLES_PER_OP = 12


@pytest.fixture(scope="module")
def op_db_by_name():
    """PyTorch's OpInfo entries by name (needs the expecttest package)."""
    pytest.importorskip("expecttest", reason="torch.testing._internal needs expecttest")
    from torch.testing._internal.common_methods_invocations import op_db

    return {op.name: op for op in op_db if op.variant_test_name == ""}


def _to(device):
    return lambda value: value.to(device) if isinstance(value, torch.Tensor) else value


@pytest.mark.parametrize("name", OPINFO_NAMES)
def test_opinfo_samples_match_cpu(op_db_by_name, name):
    op = op_db_by_name[name]
    samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[:MAX_SAMPLES_PER_OP]
    assert samples, f"OpInfo {name} produced no float32 samples"
    for i, sample in enumerate(samples):
        expected = op(sample.input, *sample.args, **sample.kwargs)
        device_sample = sample.transform(_to("my_asic"))
        actual = op(device_sample.input, *device_sample.args, **device_sample.kwargs)
        expected_list = expected if isinstance(expected, (tuple, list)) else [expected]
        actual_list = actual if isinstance(actual, (tuple, list)) else [actual]
        for e, a in zip(expected_list, actual_list):
            assert a.device.type == "my_asic", f"{name} sample {i}: result on {a.device}"
            problem = mismatch(e, a)
            assert problem is None, f"{name} sample {i} ({sample.summary()}): {problem}"
