"""Sorting on the simulator with device memory the host cannot address
(MY_ASIC_HOST_ADDRESSABLE=0): sort (stable and not, so argsort and msort), topk, kthvalue,
median and nanmedian run through the runtime's sort entry (kpdr.h), equal torch on the CPU for
every dtype (ties, NaN, descending, non-contiguous, empty, every k), their backward stays on
the device, and none of them falls back."""

from case_runner import result_of
from device_subprocess import run_python
from sort_cases import assert_result, script


def test_sorting_ops_match_the_cpu_without_falling_back():
    assert_result(result_of(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))
