"""Sorting (kpdr.h's sort entry: a bitonic sort in local memory, global merge passes for
slices longer than a tile) on the OpenCL runtime: PoCL in CI, a GPU where present."""

import sys
from pathlib import Path

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from case_runner import result_of  # noqa: E402
from sort_cases import assert_result, script  # noqa: E402


def test_sorting_ops_match_the_cpu_without_falling_back():
    assert_result(result_of(run_on_opencl(script())))


def test_the_sort_entry_gives_the_documented_order_through_the_abi(load_opencl):
    from kpdr_sort import check_entries

    check_entries(load_opencl(), long_slices=(2048, 2049, 5000))
