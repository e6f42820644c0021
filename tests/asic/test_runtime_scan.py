"""Scans and compaction on the simulator with device memory the host cannot address
(MY_ASIC_HOST_ADDRESSABLE=0): cumsum, cumprod, logcumsumexp (and their backward), flip, nonzero,
masked_select and boolean-mask indexing and assignment run through the runtime's scan entry
(with pointwise and scatter), equal torch on the CPU for every dtype (non-contiguous, empty and
0-dim operands, long lines), none of them falls back, and malformed calls raise ATen's errors."""

import json

from case_runner import result_of
from device_subprocess import last_line, run_python
from scan_cases import assert_result, script


def test_scans_and_compaction_match_the_cpu_without_falling_back():
    assert_result(result_of(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))


def test_nonzero_computes_its_shape_without_python_meta_kernels():
    out = last_line(run_python("""
        import json, sys, torch, kernel_pytorch
        x = torch.tensor([[0.0, 1.0], [2.0, 0.0]], device="my_asic")
        print(json.dumps({"rows": x.nonzero().cpu().tolist(), "selected": x[x > 0].cpu().tolist(),
                          "imported": "torch._dynamo" in sys.modules, "fallbacks": torch.my_asic.fallback_stats()}))
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"}))
    assert json.loads(out) == {"rows": [[0, 1], [1, 0]], "selected": [1.0, 2.0], "imported": False, "fallbacks": {}}
