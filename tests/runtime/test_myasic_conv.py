"""The simulator's im2col and max_pool2d entries (kpdr.h core ops) against numpy, in both memory modes."""

import pytest

from kpdr_conv import check_entries


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_im2col_and_max_pool2d_entries_match_numpy_and_reject_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))
