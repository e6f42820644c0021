"""Bad input gets an error that names the problem and the fix."""

import pytest
import torch

from device_subprocess import run_python

pytestmark = pytest.mark.usefixtures("two_devices")


def test_out_of_range_device_index_names_valid_range():
    with pytest.raises(RuntimeError, match=r"invalid device index 5.*valid indices 0\.\.1"):
        torch.empty(1, device="my_asic:5")


def test_set_device_out_of_range_names_valid_range():
    with pytest.raises(RuntimeError, match=r"valid indices 0\.\.1"):
        torch.my_asic.set_device(7)


def test_out_of_range_device_leaves_current_device_unchanged():
    with pytest.raises(RuntimeError):
        torch.my_asic.set_device(7)
    assert torch.my_asic.current_device() == 0


def test_mixing_devices_in_elementwise_op_names_both_devices():
    with pytest.raises(RuntimeError, match="my_asic:0 and my_asic:1"):
        torch.ones(2, device="my_asic:0") + torch.ones(2, device="my_asic:1")


def test_mixing_devices_in_fallback_op_says_how_to_fix():
    with pytest.raises(RuntimeError, match=r"my_asic:0 and my_asic:1.*Move them to one device"):
        torch.mm(torch.ones(2, 2, device="my_asic:0"), torch.ones(2, 2, device="my_asic:1"))


def _beyond_capacity_bytes():
    return 2 * torch.my_asic.get_device_properties(0).total_memory


def test_allocation_beyond_capacity_raises_out_of_memory_with_figures():
    with pytest.raises(torch.OutOfMemoryError, match=r"^my_asic out of memory\. Tried to allocate .*GiB.*has a total capacity of .*GiB of which .* is free"):
        torch.empty(_beyond_capacity_bytes(), dtype=torch.uint8, device="my_asic")


def test_out_of_memory_message_states_the_request_and_the_advice_once():
    size = _beyond_capacity_bytes()
    with pytest.raises(torch.OutOfMemoryError) as error:
        torch.empty(size, dtype=torch.uint8, device="my_asic")
    message = str(error.value).split("\n")[0]
    assert message.count(str(size)) == 1
    assert message.lower().count("free tensors") == 1
    assert message.count("empty_cache") == 1


def test_device_stays_usable_after_out_of_memory():
    baseline = torch.my_asic.memory_allocated()
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(_beyond_capacity_bytes(), dtype=torch.uint8, device="my_asic")
    assert torch.my_asic.memory_allocated() == baseline
    assert torch.ones(4, device="my_asic").sum().item() == 4.0


def test_out_of_memory_is_counted_in_memory_stats():
    ooms = torch.my_asic.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(_beyond_capacity_bytes(), dtype=torch.uint8, device="my_asic")
    assert torch.my_asic.memory_stats()["num_ooms"] == ooms + 1


def test_interprocess_events_are_rejected():
    with pytest.raises(ValueError, match="cannot be shared between processes"):
        torch.my_asic.Event(interprocess=True)


def test_set_storage_from_cpu_is_rejected():
    with pytest.raises(RuntimeError, match="set_\\(\\) needs a my_asic storage"):
        torch.empty(0, device="my_asic").set_(torch.ones(3).untyped_storage())



def test_host_running_out_is_reported_as_the_host_not_a_full_device():
    # The device has room, but the host cannot map more (an address-space limit set after
    # initialisation stands in for a host out of memory): the message must not claim the
    # device is full while quoting its free memory.
    out = run_python("""
        import resource, torch, kernel_pytorch
        torch.empty(1, device="my_asic")
        free, _ = torch.my_asic.mem_get_info(0)
        size = min(2**30, free // 2)
        with open("/proc/self/status") as status:
            used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (used + 128 * 2**20, resource.RLIM_INFINITY))
        try:
            torch.empty(size, dtype=torch.uint8, device="my_asic")
            print("allocated")
        except torch.OutOfMemoryError as error:
            print(str(error).splitlines()[0])
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print(torch.ones(4, device="my_asic").sum().item())  # the device stays usable
    """)
    message, after = out.strip().rsplit("\n", 1)
    assert message.startswith("my_asic could not allocate") and "free of" in message
    assert "host out of memory" in message and "not the simulated device, ran out" in message
    assert "tried to allocate" not in message
    assert after == "4.0"
