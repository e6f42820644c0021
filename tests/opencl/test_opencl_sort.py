"""Sorting (kpdr.h's sort entry: a bitonic sort in local memory, global merge passes for
slices longer than a tile) on the OpenCL runtime: PoCL in CI, a GPU where present."""

import json
import sys
from pathlib import Path

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from sort_cases import script  # noqa: E402


def test_sorting_ops_match_the_cpu_without_falling_back():
    result = json.loads(run_on_opencl(script()).strip().splitlines()[-1])
    assert result["checked"] >= 500
    assert result["fallbacks"] == {}
    errors = result["errors"]
    assert errors[0].startswith("IndexError: Dimension out of range"), errors
    assert "selected index k out of range" in errors[1], errors
    assert "bool" in errors[2].lower() and "kthvalue" in errors[3] and "Bool" in errors[4], errors


def test_the_sort_entry_gives_the_documented_order_through_the_abi(load_opencl):
    from kpdr_sort import check_entries

    check_entries(load_opencl(), long_slices=(2048, 2049, 5000))
