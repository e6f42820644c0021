"""The simulator's softmax_dim, nll_loss and layer_norm entries and reduce's statistics codes
(kpdr.h core ops) against numpy through ctypes, in both memory modes."""

import pytest

from kpdr_losses import check_entries


@pytest.mark.parametrize("host_addressable", [0, 1])
def test_loss_and_statistics_entries_match_numpy_and_reject_bad_calls(load_myasic, host_addressable):
    check_entries(load_myasic(f"host_addressable={host_addressable}"))
