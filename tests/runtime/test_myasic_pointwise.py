"""The simulator's pointwise and reduce entries (kpdr.h core ops) against numpy, in both memory modes."""

import pytest

from kpdr_pointwise import check_entries, check_layouts


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_pointwise_and_reduce_entries_match_numpy_and_reject_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))


def test_contiguous_misaligned_and_column_layouts_match_numpy(load_myasic):
    check_layouts(load_myasic("host_addressable=0"))
