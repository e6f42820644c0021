"""The simulator's gather and scatter entries and the pointwise entry's integer and
index-dependent codes (kpdr.h core ops) against numpy, in both memory modes."""

import pytest

from kpdr_indexing import check_entries


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_gather_scatter_and_integer_pointwise_match_numpy_and_reject_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))
