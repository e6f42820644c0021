"""Copies in every direction, with and without host-addressable device memory.

The cases live in copy_cases.py. In this process the runtime's memory is host
addressable, so layout and dtype conversions use the host view of device
memory; the second sweep repeats every case in a subprocess with
MY_ASIC_HOST_ADDRESSABLE=0, where only the runtime's memcpy may touch it.
"""

import json

import pytest
import torch

from copy_cases import CASES, mismatch
from device_subprocess import last_line, run_python

pytestmark = pytest.mark.usefixtures("two_devices")


@pytest.mark.parametrize("name", sorted(CASES))
def test_copy_matches_cpu(name):
    problem = mismatch(*CASES[name]())
    assert problem is None, f"{name}: {problem}"


@pytest.fixture(scope="module")
def copy_report_without_host_access():
    """{case: problem or None} from running every case with MY_ASIC_HOST_ADDRESSABLE=0."""
    out = run_python(
        """
        import sys, torch, kernel_pytorch
        sys.path.insert(0, "tests/asic")
        assert not torch.my_asic.get_device_properties(0).host_addressable
        import copy_cases
        copy_cases.report_all_cases()
        """,
        env={"MY_ASIC_HOST_ADDRESSABLE": "0"},
    )
    return json.loads(last_line(out))


@pytest.mark.parametrize("name", sorted(CASES))
def test_copy_without_host_access_matches_cpu(copy_report_without_host_access, name):
    assert copy_report_without_host_access[name] is None, f"{name}: {copy_report_without_host_access[name]}"


def test_copy_to_second_device_leaves_source_unchanged():
    source = torch.arange(6.0, device="my_asic:0")
    source.to("my_asic:1").mul_(10)
    assert source.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_device_to_device_copy_is_not_a_view():
    source = torch.zeros(3, device="my_asic")
    copy = source.clone()
    copy.fill_(1.0)
    assert source.cpu().tolist() == [0.0, 0.0, 0.0]
