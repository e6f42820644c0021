"""Specification of select_device / explain_selection (rules: selection module docstring).

The DeviceSpecs below are hand-written descriptions of hardware this machine
does not have (fakes at the hardware boundary); the selection code under test
is real.
"""

import pytest
import torch

import hal_test_support
from kernel_pytorch.hardware_abstraction.hal_core import HardwareVendor
from kernel_pytorch.hardware_abstraction.selection import explain_selection, parse_vendor_list, select_device


def fake_spec(vendor, index=0, free_gb=40.0, bf16=100.0, fp32=20.0, torch_usable=True, name=None, simulated=False):
    return hal_test_support.fake_spec(
        vendor, index, free_gb, bf16, fp32=fp32, total_gb=max(free_gb, 1.0) * 2, torch_usable=torch_usable, name=name,
        simulated=simulated,
    )


def test_returns_none_when_no_device_has_enough_free_memory():
    devices = [fake_spec("nvidia", free_gb=4.0)]
    assert select_device(devices, memory_gb=8, compute_tflops=1) is None


def test_memory_filter_uses_free_not_total_memory():
    busy = fake_spec("nvidia", free_gb=2.0)  # total is 4 GB
    assert busy.capabilities.memory_total_gb >= 4
    assert select_device([busy], memory_gb=3, compute_tflops=0) is None


def test_compute_filter_uses_the_peak_for_the_requested_dtype():
    gpu = fake_spec("nvidia", bf16=100.0, fp32=20.0)
    assert select_device([gpu], memory_gb=1, compute_tflops=50, dtype="bf16") is gpu
    assert select_device([gpu], memory_gb=1, compute_tflops=50, dtype=torch.float32) is None


def test_device_without_the_dtype_is_rejected_with_that_reason():
    no_bf16 = fake_spec("nvidia", bf16=None)
    (verdict,) = explain_selection([no_bf16], memory_gb=1, compute_tflops=0, dtype="bf16")
    assert not verdict.accepted
    assert verdict.reasons == ("no bf16 support (or its peak rate is unknown)",)


def test_without_a_dtype_there_is_no_compute_rule():
    unknown_peak = fake_spec("custom_asic", bf16=None, fp32=None)
    assert select_device([unknown_peak], memory_gb=1, compute_tflops=0, dtype=None) is unknown_peak
    (verdict,) = explain_selection([unknown_peak], memory_gb=1, compute_tflops=0, dtype=None)
    assert verdict.accepted and verdict.peak_tflops is None


def test_a_compute_requirement_without_a_dtype_is_an_error():
    with pytest.raises(ValueError, match="compute_tflops=5 needs a dtype"):
        select_device([fake_spec("nvidia")], memory_gb=1, compute_tflops=5, dtype=None)


def test_earlier_preferred_vendor_wins_even_with_less_headroom():
    amd = fake_spec("amd", free_gb=190.0)
    nvidia = fake_spec("nvidia", free_gb=20.0)
    assert select_device([amd, nvidia], 8, 10, preferred_vendors=["nvidia", "amd"]) is nvidia
    assert select_device([amd, nvidia], 8, 10, preferred_vendors=["amd", "nvidia"]) is amd


def test_vendors_missing_from_the_preference_list_are_excluded():
    cpu = fake_spec("cpu", free_gb=500.0, bf16=2.0)
    verdicts = explain_selection([cpu], 1, 1, preferred_vendors=["nvidia"])
    assert verdicts[0].reasons == ("vendor cpu is not in preferred_vendors (nvidia)",)


def test_within_a_vendor_more_memory_headroom_ranks_first():
    small = fake_spec("nvidia", index=0, free_gb=16.0)
    large = fake_spec("nvidia", index=1, free_gb=70.0)
    assert select_device([small, large], 8, 10) is large


def test_equal_headroom_is_broken_by_higher_peak_then_discovery_order():
    slow = fake_spec("nvidia", index=0, bf16=100.0)
    fast = fake_spec("nvidia", index=1, bf16=900.0)
    twin = fake_spec("nvidia", index=2, bf16=900.0)
    ranked = [v.device for v in explain_selection([slow, fast, twin], 8, 10) if v.accepted]
    assert ranked == [fast, twin, slow]


def test_without_preference_accelerators_rank_before_the_cpu():
    cpu = fake_spec("cpu", free_gb=500.0, bf16=50.0)
    asic = fake_spec("custom_asic", free_gb=16.0, bf16=50.0)
    assert select_device([cpu, asic], 8, 10) is asic


def test_without_preference_a_simulated_device_ranks_after_the_real_cpu():
    cpu = fake_spec("cpu", free_gb=20.0, bf16=0.7)
    simulated = fake_spec("custom_asic", free_gb=17.0, bf16=0.7, simulated=True)
    ranked = [v.device for v in explain_selection([simulated, cpu], 1, 0) if v.accepted]
    assert ranked == [cpu, simulated]


def test_naming_the_vendor_selects_the_simulated_device():
    cpu = fake_spec("cpu", free_gb=20.0, bf16=0.7)
    simulated = fake_spec("custom_asic", free_gb=17.0, bf16=0.7, simulated=True)
    assert select_device([simulated, cpu], 1, 0, preferred_vendors=["my_asic", "cpu"]) is simulated


def test_a_simulated_device_is_still_chosen_when_nothing_real_fits():
    cpu = fake_spec("cpu", free_gb=2.0, bf16=0.7)
    simulated = fake_spec("custom_asic", free_gb=17.0, bf16=0.7, simulated=True)
    assert select_device([cpu, simulated], 8, 0) is simulated


def test_devices_torch_cannot_use_are_never_selected():
    opencl = fake_spec("opencl", free_gb=100.0, torch_usable=False)
    (verdict,) = explain_selection([opencl], 1, 0, preferred_vendors=["opencl"])
    assert verdict.reasons == ("torch cannot use this device (no backend for it in this torch build)",)


def test_explanation_lists_every_failed_rule_and_ranks_the_rest():
    good = fake_spec("nvidia", index=0, free_gb=80.0, bf16=900.0)
    weak = fake_spec("nvidia", index=1, free_gb=4.0, bf16=5.0)
    verdicts = explain_selection([weak, good], memory_gb=8, compute_tflops=20)
    assert [v.rank for v in verdicts] == [0, None]
    assert verdicts[0].device is good
    assert verdicts[0].memory_headroom_gb == pytest.approx(72.0)
    assert verdicts[1].reasons == (
        "free memory 4.00 GB < required 8 GB (short by 4.00 GB)",
        "peak bf16 5 TFLOPS < required 20 TFLOPS",
    )
    assert str(verdicts[1]).startswith("rejected cuda:1 [nvidia] fake nvidia 1: free memory")


def test_vendor_names_accept_aliases_case_and_comma_separated_strings():
    assert parse_vendor_list("CUDA, rocm") == (HardwareVendor.NVIDIA, HardwareVendor.AMD)
    assert parse_vendor_list(["xpu", HardwareVendor.CPU, "cpu"]) == (HardwareVendor.INTEL, HardwareVendor.CPU)
    assert parse_vendor_list(None) is None


def test_unknown_vendor_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown hardware vendor 'nvidai'"):
        select_device([], 1, 1, preferred_vendors=["nvidai"])


def test_empty_preference_list_is_an_error_that_suggests_none():
    with pytest.raises(ValueError, match="pass None to consider every vendor"):
        select_device([], 1, 1, preferred_vendors=[])


@pytest.mark.parametrize("memory_gb, tflops, name", [(-1, 1, "memory_gb"), (1, -0.5, "compute_tflops"), ("8", 1, "memory_gb")])
def test_negative_or_non_numeric_requirements_are_rejected(memory_gb, tflops, name):
    with pytest.raises(ValueError, match=f"{name} must be a number >= 0"):
        select_device([], memory_gb, tflops)


def test_unknown_dtype_is_rejected():
    with pytest.raises(ValueError, match="no precision class"):
        select_device([], 1, 1, dtype=torch.complex64)
