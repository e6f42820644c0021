"""The simulator's sort entry (kpdr.h's kpdrSortArgs) against a Python reference of the
documented order, in both memory modes."""

import pytest

from kpdr_sort import check_entries


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_sort_gives_the_documented_order_and_rejects_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))
