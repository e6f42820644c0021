"""Indexing, embedding, cat, integer and index-dependent pointwise ops on the simulator with
device memory the host cannot address (MY_ASIC_HOST_ADDRESSABLE=0): they run through the
runtime's gather, scatter and pointwise entries (kpdr.h's core-op section), equal torch on the
CPU for every dtype (duplicate and negative indices, non-contiguous operands), none of them
falls back, and out-of-range indices raise IndexError naming the index."""

import json

from device_subprocess import last_line, run_python
from indexing_cases import script


def _run():
    return json.loads(last_line(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))


def test_indexing_and_integer_ops_match_the_cpu_without_falling_back():
    result = _run()
    assert result["checked"] >= 300
    assert result["fallbacks"] == {}


def test_out_of_range_indices_raise_index_errors_naming_the_index():
    errors = _run()["errors"]
    assert len(errors) == 8 and "no error" not in errors, errors
    assert "index 5 is out of bounds for dimension 0 with size 5" in errors[0]
    assert "index -1" in errors[1]
    assert "index 7" in errors[2]
    assert "index -6" in errors[3]
    assert "index 9" in errors[4]
    assert "gather(): index 3 is out of bounds for dimension 1 with size 3" in errors[5]
    assert "scatter_add_(): index 5" in errors[6]
    assert "index_add_(): index 8" in errors[7]
