"""The simulator's random entry (kpdr.h: Philox4x32-10 per element) against numpy's
reference of the documented algorithm, in both memory modes."""

import pytest

from kpdr_random import check_entries


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_random_fills_match_the_documented_philox_and_reject_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))
