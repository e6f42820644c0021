"""Indexing, embedding, cat, integer and index-dependent pointwise ops (kpdr.h's gather, scatter
and pointwise entries) on the OpenCL runtime: PoCL in CI, a GPU where present. Scatter's
accumulation uses atomics (float32 compare-and-swap; 16-bit types through their 32-bit word).
The cases and the out-of-range errors expected are the simulator's (indexing_cases.py)."""

import sys
from pathlib import Path

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from case_runner import result_of  # noqa: E402
from indexing_cases import assert_cases, assert_errors, script  # noqa: E402


def test_indexing_and_integer_ops_match_the_cpu_without_falling_back():
    result = result_of(run_on_opencl(script()))
    assert_cases(result)
    assert_errors(result["errors"])


def test_the_gather_and_scatter_entries_match_numpy_through_the_abi(load_opencl):
    from kpdr_indexing import check_entries

    check_entries(load_opencl())
