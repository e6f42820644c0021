"""Sorting on the simulator with device memory the host cannot address
(MY_ASIC_HOST_ADDRESSABLE=0): sort (stable and not, so argsort and msort), topk, kthvalue,
median and nanmedian run through the runtime's sort entry (kpdr.h), equal torch on the CPU for
every dtype (ties, NaN, descending, non-contiguous, empty, every k), their backward stays on
the device, and none of them falls back."""

import json

from device_subprocess import last_line, run_python
from sort_cases import script


def test_sorting_ops_match_the_cpu_without_falling_back():
    result = json.loads(last_line(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))
    assert result["checked"] >= 500
    assert result["fallbacks"] == {}
    errors = result["errors"]
    assert errors[0].startswith("IndexError: Dimension out of range"), errors
    assert "selected index k out of range" in errors[1], errors
    assert "bool" in errors[2].lower() and "kthvalue" in errors[3] and "Bool" in errors[4], errors
