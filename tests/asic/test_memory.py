"""The caching device allocator (statistics, caching, empty_cache, memory fraction) and pinned host memory.

Block sizes: requests up to 1 MiB round up to 512 bytes (small pool), larger
ones to 2 MiB (large pool). Tests use exact multiples so the rounding is known.
"""

import warnings

import pytest
import torch

pytestmark = pytest.mark.usefixtures("device_count")

MiB = 1 << 20


@pytest.fixture(autouse=True)
def empty_allocator_cache():
    """Each test starts with no cached blocks, so fresh allocations hit the runtime."""
    torch.my_asic.synchronize()
    torch.my_asic.empty_cache()
    yield
    torch.my_asic.set_per_process_memory_fraction(1.0)


def test_memory_allocated_grows_by_tensor_size_and_returns_on_free():
    before = torch.my_asic.memory_allocated()
    tensor = torch.empty(MiB // 4, dtype=torch.float32, device="my_asic")  # exactly 1 MiB
    assert torch.my_asic.memory_allocated() == before + MiB
    del tensor
    assert torch.my_asic.memory_allocated() == before


def test_freed_memory_stays_reserved_until_empty_cache():
    reserved_before = torch.my_asic.memory_reserved()
    tensor = torch.empty(4 * MiB, dtype=torch.uint8, device="my_asic")
    del tensor
    assert torch.my_asic.memory_reserved() == reserved_before + 4 * MiB
    torch.my_asic.empty_cache()
    assert torch.my_asic.memory_reserved() == reserved_before


def test_freed_block_is_reused_without_a_new_device_allocation():
    first = torch.empty(4 * MiB, dtype=torch.uint8, device="my_asic")
    address = first.data_ptr()
    del first
    device_allocs = torch.my_asic.memory_stats()["num_device_alloc"]
    second = torch.empty(4 * MiB, dtype=torch.uint8, device="my_asic")
    assert second.data_ptr() == address
    assert torch.my_asic.memory_stats()["num_device_alloc"] == device_allocs


def test_peak_tracks_high_water_mark_until_reset():
    base = torch.my_asic.memory_allocated()
    torch.my_asic.reset_peak_memory_stats()
    big = torch.empty(8 * MiB, dtype=torch.uint8, device="my_asic")
    del big
    assert torch.my_asic.max_memory_allocated() == base + 8 * MiB
    torch.my_asic.reset_peak_memory_stats()
    assert torch.my_asic.max_memory_allocated() == base


def test_stats_count_allocations_per_pool():
    before = torch.my_asic.memory_stats()
    small = torch.empty(1024, dtype=torch.uint8, device="my_asic")
    large = torch.empty(2 * MiB, dtype=torch.uint8, device="my_asic")
    after = torch.my_asic.memory_stats()
    assert after["allocation.all.current"] == before["allocation.all.current"] + 2
    assert after["allocation.small_pool.allocated"] == before["allocation.small_pool.allocated"] + 1
    assert after["allocation.large_pool.allocated"] == before["allocation.large_pool.allocated"] + 1
    assert after["requested_bytes.all.current"] == before["requested_bytes.all.current"] + 1024 + 2 * MiB
    del small, large


def test_each_device_has_its_own_statistics(two_devices):
    on_device0 = torch.my_asic.memory_allocated(0)
    tensor = torch.empty(MiB, dtype=torch.uint8, device=two_devices[1])
    assert torch.my_asic.memory_allocated(0) == on_device0
    assert torch.my_asic.memory_allocated(1) >= MiB
    del tensor


def test_mem_get_info_free_drops_by_new_reservation():
    free_before, total = torch.my_asic.mem_get_info()
    tensor = torch.empty(16 * MiB, dtype=torch.uint8, device="my_asic")
    free_after, _ = torch.my_asic.mem_get_info()
    assert free_before - free_after == 16 * MiB
    assert total == torch.my_asic.get_device_properties().total_memory
    del tensor


def test_memory_fraction_caps_reservation_with_out_of_memory_error():
    total = torch.my_asic.get_device_properties().total_memory
    torch.my_asic.set_per_process_memory_fraction(0.01)
    assert torch.my_asic.get_per_process_memory_fraction() == 0.01
    with pytest.raises(torch.OutOfMemoryError, match="per-process memory fraction"):
        torch.empty(int(total * 0.02), dtype=torch.uint8, device="my_asic")


def test_memory_fraction_still_allows_allocations_under_the_cap():
    torch.my_asic.set_per_process_memory_fraction(0.01)
    tensor = torch.ones(MiB, dtype=torch.uint8, device="my_asic")
    assert tensor.sum().item() == MiB


def test_memory_fraction_outside_unit_interval_is_rejected():
    with pytest.raises(ValueError, match=r"fraction must be a number in \(0, 1\]"):
        torch.my_asic.set_per_process_memory_fraction(1.5)


def test_pin_memory_gives_pinned_tensor_with_same_values():
    source = torch.arange(10.0)
    pinned = source.pin_memory()
    assert pinned.is_pinned()
    assert not source.is_pinned()
    assert torch.equal(pinned, source)


def test_pin_memory_factory_argument_allocates_pinned_memory():
    pinned = torch.empty(16, pin_memory=True)
    if torch.cuda.is_available():
        # ATen gives CUDA's pinned-memory allocator precedence over any other
        # accelerator's whenever a CUDA device is present
        # (GetCPUAllocatorMaybePinned), so the pages are CUDA-pinned there.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # is_pinned(device) is deprecated
            assert pinned.is_pinned("cuda")
    else:
        assert pinned.is_pinned()


def test_views_of_pinned_memory_are_pinned():
    pinned = torch.zeros(64).pin_memory()
    assert pinned[32:].is_pinned()


def test_reusing_a_larger_cached_block_keeps_memory_allocated_exact():
    # A 316-float request (1264 -> 1536 bytes) may reuse a cached 2048-byte
    # block: malloc and free must count the same block size.
    torch.my_asic.synchronize()
    before = torch.my_asic.memory_allocated()
    x = torch.empty(512, device="my_asic")
    del x
    q = torch.empty(316, device="my_asic")
    assert torch.my_asic.memory_allocated() - before == 2048  # the reused block
    del q
    assert torch.my_asic.memory_allocated() == before


def test_mixed_sizes_never_drive_allocated_or_active_bytes_below_the_start():
    before = torch.my_asic.memory_stats()
    sizes = [512, 316, 700, 129, 1000, 333, 64, 512, 4096, 3000]
    for i in range(2000):
        t = torch.empty(sizes[i % len(sizes)], device="my_asic")
        del t
    after = torch.my_asic.memory_stats()
    for key in ("allocated_bytes.all.current", "active_bytes.all.current", "allocated_bytes.small_pool.current"):
        assert after[key] == before[key], key
