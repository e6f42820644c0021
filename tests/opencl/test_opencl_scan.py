"""Scans and compaction (kpdr.h's scan entry, with pointwise and scatter) on the OpenCL runtime:
PoCL in CI, a GPU where present. The entry's work-group scan, its block-total path for long
lines and its one-work-item-per-line path all meet numpy's reference through the ABI, and
cumsum, nonzero, masked_select and boolean-mask indexing equal the CPU without falling back
(malformed calls raising ATen's errors), as on the simulator (scan_cases.assert_result)."""

import sys
from pathlib import Path

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from case_runner import result_of  # noqa: E402
from scan_cases import assert_result, script  # noqa: E402


def test_scans_and_compaction_match_the_cpu_without_falling_back():
    assert_result(result_of(run_on_opencl(script())))


def test_the_scan_entry_matches_numpy_through_the_abi(load_opencl):
    from kpdr_scan import check_entries

    check_entries(load_opencl())
