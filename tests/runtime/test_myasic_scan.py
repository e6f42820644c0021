"""The simulator's scan entry (kpdr.h) against numpy, in both memory modes."""

import pytest

from kpdr_scan import check_entries


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_scans_match_numpy_for_every_op_layout_and_dtype_and_reject_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))
