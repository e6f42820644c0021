"""Device indexes are checked before anything narrows them to int8.

c10::DeviceIndex is an int8, so an unchecked 257 used to act on device 1 and
200 to complain about device -56.
"""

import pytest
import torch

from device_subprocess import last_line, run_python

pytestmark = pytest.mark.usefixtures("two_devices")

INVALID_256 = r"invalid device index 256: this process has 2 my_asic device\(s\) \(valid indices 0\.\.1\)"


@pytest.mark.parametrize("index", [128, 200, 256, 257, -1])
def test_get_device_properties_rejects_out_of_range_index(index):
    with pytest.raises(RuntimeError, match=f"invalid device index {index}:"):
        torch.my_asic.get_device_properties(index)


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.my_asic.memory_allocated(256),
        lambda: torch.my_asic.memory_stats(256),
        lambda: torch.my_asic.mem_get_info(256),
        lambda: torch.my_asic.reset_peak_memory_stats(256),
        lambda: torch.my_asic.set_per_process_memory_fraction(0.5, 256),
        lambda: torch.my_asic.synchronize(256),
        lambda: torch.my_asic.set_device(256),
        lambda: torch.my_asic.Stream(device=256),
        lambda: torch.my_asic.current_stream(256),
        lambda: torch.my_asic.default_stream(256),
        lambda: torch.my_asic.get_device_name("my_asic:256"),
        lambda: torch.my_asic.memory_allocated("my_asic:256"),
    ],
)
def test_device_api_rejects_index_256_instead_of_using_device_0(call):
    with pytest.raises(RuntimeError, match=INVALID_256):
        call()


def test_rejected_set_device_leaves_current_device_unchanged():
    torch.my_asic.set_device(1)
    try:
        with pytest.raises(RuntimeError):
            torch.my_asic.set_device(257)
        assert torch.my_asic.current_device() == 1
    finally:
        torch.my_asic.set_device(0)


def test_bindings_check_the_index_before_narrowing():
    from kernel_pytorch import _C

    with pytest.raises(RuntimeError, match=INVALID_256):
        _C._memory_stats(256)


@pytest.mark.parametrize("count", [64, 127])
def test_device_counts_up_to_127_are_accepted(count):
    out = run_python(
        f"""
        import torch, kernel_pytorch
        print(torch.my_asic.device_count(), torch.ones(1, device="my_asic:{count - 1}").device)
        """,
        env={"MY_ASIC_DEVICE_COUNT": str(count), "MY_ASIC_MEMORY_MB": "64"},
    )
    assert last_line(out) == f"{count} my_asic:{count - 1}"


def test_rejected_device_count_gives_the_same_error_every_time():
    out = run_python(
        """
        import torch, kernel_pytorch
        errors = []
        for _ in range(2):
            try:
                torch.ones(1, device="my_asic")
            except RuntimeError as e:
                errors.append(str(e).splitlines()[0])
        print(len(errors), errors[0] == errors[1], "ALREADY_INITIALIZED" in " ".join(errors), "128" in errors[0])
        """,
        env={"MY_ASIC_DEVICE_COUNT": "128"},
    )
    assert last_line(out) == "2 True False True"
