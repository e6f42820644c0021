"""Random fills and dropout (kpdr.h's random entry: Philox4x32-10 per element) on the OpenCL
runtime: PoCL in CI, a GPU where present. The entry gives the values of numpy's reference of
the documented algorithm, so a seed draws the same sequence on every runtime."""

import json
import sys
from pathlib import Path

from opencl_process import run_on_opencl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "asic"))
from random_cases import script  # noqa: E402


def test_random_fills_and_dropout_have_their_distributions_without_falling_back():
    result = json.loads(run_on_opencl(script()).strip().splitlines()[-1])
    assert result["checked"] >= 30
    assert result["fallbacks"] == {}
    assert result["errors"] == ["std", "from", "p", "lambda", "element < 0", "element < 0", "sum of probabilities",
                                "without replacement"]


def test_the_random_entry_matches_the_documented_philox_through_the_abi(load_opencl):
    from kpdr_random import check_entries

    check_entries(load_opencl())
