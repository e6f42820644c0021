"""Specification of SystemProfile: threads, autocast precision and memory cap, applied and restored together."""

import pytest
import torch

import kernel_pytorch  # noqa: F401  (registers torch.my_asic when the extension is built)
from kernel_pytorch.hardware_abstraction.system_profile import SystemProfile

MIB = 1024**2

from hal_test_support import requires_my_asic  # noqa: E402


@pytest.fixture
def other_thread_count():
    """A thread count different from the current one (the current one is restored afterwards)."""
    before = torch.get_num_threads()
    yield 1 if before != 1 else 2
    torch.set_num_threads(before)


def test_apply_sets_the_thread_count_and_restore_puts_it_back(other_thread_count):
    before = torch.get_num_threads()
    profile = SystemProfile(num_threads=other_thread_count).apply()
    assert torch.get_num_threads() == other_thread_count
    profile.restore()
    assert torch.get_num_threads() == before


def test_num_threads_none_leaves_the_thread_count_alone():
    before = torch.get_num_threads()
    with SystemProfile(num_threads=None):
        assert torch.get_num_threads() == before


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_low_precision_profiles_run_cpu_matmuls_under_autocast(precision, dtype):
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with SystemProfile(precision=precision, device="cpu"):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == dtype
        assert (a @ b).dtype == dtype
    assert not torch.is_autocast_enabled("cpu")
    assert (a @ b).dtype == torch.float32


def test_fp32_profile_does_not_enable_autocast():
    with SystemProfile(precision="fp32"):
        assert not torch.is_autocast_enabled("cpu")


def test_torch_dtypes_are_accepted_as_precision():
    assert SystemProfile(precision=torch.bfloat16).precision == "bf16"


def test_context_manager_restores_state_when_the_body_raises(other_thread_count):
    before = torch.get_num_threads()
    with pytest.raises(KeyError):
        with SystemProfile(num_threads=other_thread_count, precision="bf16"):
            raise KeyError("boom")
    assert torch.get_num_threads() == before
    assert not torch.is_autocast_enabled("cpu")


def test_cpu_memory_limit_is_recorded_and_enforced_by_check_allocation():
    profile = SystemProfile(memory_limit=64 * MIB, device="cpu")
    assert not profile.memory_cap_enforced_by_allocator
    profile.check_allocation(64 * MIB)  # exactly at the cap is allowed
    with pytest.raises(MemoryError, match=r"exceeds this SystemProfile's memory_limit .* by 1048576 bytes"):
        profile.check_allocation(65 * MIB)


def test_applying_twice_without_restore_is_an_error():
    profile = SystemProfile().apply()
    try:
        with pytest.raises(RuntimeError, match="already applied"):
            profile.apply()
    finally:
        profile.restore()


def test_restore_without_apply_is_an_error():
    with pytest.raises(RuntimeError, match="not applied"):
        SystemProfile().restore()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_threads": 0}, "num_threads must be a positive integer"),
        ({"precision": "int8"}, "not a SystemProfile precision"),
        ({"memory_limit": -5}, "memory_limit must be a positive number of bytes"),
        ({"memory_limit": 1.5e9}, "memory_limit must be a positive number of bytes"),
    ],
)
def test_bad_settings_are_rejected_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SystemProfile(**kwargs)


@requires_my_asic
def test_my_asic_memory_limit_is_enforced_by_the_device_allocator():
    device = torch.device("my_asic:0")
    profile = SystemProfile(memory_limit=64 * MIB, device=device)
    assert profile.memory_cap_enforced_by_allocator
    with profile:
        with pytest.raises(RuntimeError):  # torch.OutOfMemoryError is a RuntimeError
            torch.empty(128 * MIB, dtype=torch.uint8, device=device)
    # Restored: the same allocation succeeds once the cap is lifted.
    assert torch.empty(128 * MIB, dtype=torch.uint8, device=device).numel() == 128 * MIB


@requires_my_asic
def test_memory_limit_above_the_device_total_is_rejected_on_apply():
    total = torch.my_asic.get_device_properties(0).total_memory
    with pytest.raises(ValueError, match="exceeds the .* of my_asic:0"):
        SystemProfile(memory_limit=total + 1, device="my_asic:0").apply()


@requires_my_asic
def test_bf16_profile_autocasts_matmuls_on_my_asic():
    a = torch.randn(4, 4, device="my_asic:0")
    with SystemProfile(precision="bf16", device="my_asic:0"):
        assert (a @ a).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32
