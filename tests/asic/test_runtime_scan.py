"""Scans and compaction on the simulator with device memory the host cannot address
(MY_ASIC_HOST_ADDRESSABLE=0): cumsum, cumprod, logcumsumexp (and their backward), flip, nonzero,
masked_select and boolean-mask indexing and assignment run through the runtime's scan entry
(with pointwise and scatter), equal torch on the CPU for every dtype (non-contiguous, empty and
0-dim operands, long lines), none of them falls back, and malformed calls raise ATen's errors."""

import json

from device_subprocess import last_line, run_python
from scan_cases import script


def _run():
    return json.loads(last_line(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))


def test_scans_and_compaction_match_the_cpu_without_falling_back():
    result = _run()
    assert result["checked"] >= 200
    assert result["fallbacks"] == {}
    errors = result["errors"]
    assert len(errors) == 5 and "no error" not in errors, errors
    assert errors[0].startswith("IndexError: Dimension out of range")
    assert "The shape of the mask [3, 5] at index 1 does not match" in errors[1]
    assert "must match the size of tensor b" in errors[2]
    assert "dims has duplicates" in errors[3] or "appears multiple times" in errors[3]
    assert "Number of elements of source < number of ones in mask" in errors[4]


def test_nonzero_computes_its_shape_without_python_meta_kernels():
    out = last_line(run_python("""
        import json, sys, torch, kernel_pytorch
        x = torch.tensor([[0.0, 1.0], [2.0, 0.0]], device="my_asic")
        print(json.dumps({"rows": x.nonzero().cpu().tolist(), "selected": x[x > 0].cpu().tolist(),
                          "imported": "torch._dynamo" in sys.modules, "fallbacks": torch.my_asic.fallback_stats()}))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"}))
    assert json.loads(out) == {"rows": [[0, 1], [1, 0]], "selected": [1.0, 2.0], "imported": False, "fallbacks": {}}
