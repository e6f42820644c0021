"""Peak tables checked against vendors' datasheet figures (dense, theoretical)."""

import pytest

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.peak_flops import (
    ARCHITECTURES,
    NVIDIA_CORES_PER_SM,
    cpu_flop_per_clock_per_core,
    datasheet_clock_mhz,
    nvidia_architecture,
    theoretical_peak_tflops,
)

# (vendor, architecture, units, product name as the vendor API reports it,
#  precision, datasheet TFLOPS/TOPS dense).  Datasheets: NVIDIA H100/H200/A100/V100/T4/L40S/
#  A40, AMD MI300X/MI250X/MI210/MI355X, Intel Data Center GPU Max 1550.
DATASHEET = [
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "bf16", 989.4),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "fp8", 1978.9),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "tf32", 494.7),
    ("nvidia", "hopper", 114, "NVIDIA H100 PCIe", "bf16", 756.0),
    ("nvidia", "hopper", 132, "NVIDIA H200", "bf16", 989.4),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "bf16", 312.0),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "tf32", 156.0),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "fp32", 19.5),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "fp64", 19.5),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "int8", 624.0),
    ("nvidia", "volta", 80, "Tesla V100-SXM2-16GB", "fp32", 15.7),
    ("nvidia", "volta", 80, "Tesla V100-SXM2-16GB", "fp16", 125.0),
    ("nvidia", "turing", 40, "Tesla T4", "fp16", 65.0),
    ("nvidia", "ada", 142, "NVIDIA L40S", "bf16", 362.05),
    ("nvidia", "ampere-ga10x", 84, "NVIDIA A40", "fp16", 149.7),
    ("amd", "gfx942", 304, "AMD Instinct MI300X", "bf16", 1307.4),
    ("amd", "gfx942", 304, "AMD Instinct MI300X", "fp8", 2614.9),
    ("amd", "gfx942", 304, "AMD Instinct MI300X", "fp64", 163.4),
    ("amd", "gfx90a", 220, "AMD Instinct MI250X", "bf16", 383.0),
    ("amd", "gfx90a", 104, "AMD Instinct MI210", "bf16", 181.0),
    ("amd", "gfx950", 256, "AMD Instinct MI355X", "bf16", 2516.6),
    ("intel", "xe-hpc", 1024, "Intel(R) Data Center GPU Max 1550", "bf16", 839.0),
    ("intel", "xe-hpc", 1024, "Intel(R) Data Center GPU Max 1550", "fp64", 52.4),
]


@pytest.mark.parametrize("vendor, arch, units, product, precision, datasheet", DATASHEET,
                         ids=[f"{row[3]}-{row[4]}" for row in DATASHEET])
def test_table_reproduces_datasheet_within_two_percent(vendor, arch, units, product, precision, datasheet):
    clock = datasheet_clock_mhz(vendor, product)
    assert clock is not None, f"{product} missing from PRODUCT_CLOCKS"
    peak = theoretical_peak_tflops(vendor, arch, units, clock)[precision]
    assert peak == pytest.approx(datasheet, rel=0.02)


def test_h100_uses_datasheet_clock_not_boost_clock():
    assert datasheet_clock_mhz("nvidia", "NVIDIA H100 80GB HBM3") == 1830
    boost = theoretical_peak_tflops("nvidia", "hopper", 132, 1980)["bf16"]
    assert boost > 1050  # what the NVML max clock would claim


@pytest.mark.parametrize("product", ["NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA B200"])
def test_products_without_a_known_datasheet_clock_are_not_guessed(product):
    assert datasheet_clock_mhz("nvidia", product) is None


def test_precisions_are_listed_only_where_the_architecture_has_them():
    assert "fp8" not in ARCHITECTURES[(HardwareVendor.NVIDIA, "ampere")].flop_per_clock_per_unit
    assert "bf16" not in ARCHITECTURES[(HardwareVendor.NVIDIA, "volta")].flop_per_clock_per_unit
    assert "fp8" in ARCHITECTURES[(HardwareVendor.NVIDIA, "hopper")].flop_per_clock_per_unit
    assert "tf32" not in ARCHITECTURES[(HardwareVendor.AMD, "gfx90a")].flop_per_clock_per_unit


def test_amd_architecture_ignores_target_feature_suffix():
    plain = theoretical_peak_tflops("amd", "gfx942", 304, 2100)
    assert theoretical_peak_tflops("amd", "gfx942:sramecc+:xnack-", 304, 2100) == plain


def test_unknown_architecture_error_lists_the_known_ones():
    with pytest.raises(ValueError, match="no peak-throughput table for amd architecture 'gfx1100'.*gfx942"):
        theoretical_peak_tflops("amd", "gfx1100", 96, 2500)


def test_non_positive_units_or_clock_are_rejected():
    with pytest.raises(ValueError, match="positive unit count and clock"):
        theoretical_peak_tflops("nvidia", "hopper", 0, 1830)


@pytest.mark.parametrize("cc, name, arch", [
    ("9.0", "NVIDIA H100 80GB HBM3", "hopper"), ("8.0", "NVIDIA A100-SXM4-80GB", "ampere"),
    ("8.9", "NVIDIA L40S", "ada"), ("8.9", "NVIDIA GeForce RTX 4090", "ada-geforce"),
    ("8.6", "NVIDIA GeForce RTX 3090", "ampere-ga10x-geforce"), ("12.0", "future", None),
])
def test_nvidia_architecture_from_compute_capability(cc, name, arch):
    assert nvidia_architecture(cc, name) == arch


def test_every_nvidia_architecture_knows_its_cores_per_sm():
    nvidia = {a for v, a in ARCHITECTURES if v is HardwareVendor.NVIDIA}
    assert nvidia == set(NVIDIA_CORES_PER_SM)


def test_cpu_rates_follow_isa_width():
    assert cpu_flop_per_clock_per_core("AVX512")["fp32"] == 64
    assert cpu_flop_per_clock_per_core("AVX2")["fp32"] == 32
    assert cpu_flop_per_clock_per_core("AVX2")["fp64"] == 16


def test_cpu_native_bf16_and_amx_raise_the_bf16_rate():
    assert cpu_flop_per_clock_per_core("AVX512", ["avx512_bf16"])["bf16"] == 128
    amx = cpu_flop_per_clock_per_core("AVX512", ["avx512_bf16", "amx_bf16", "amx_int8"])
    assert amx["bf16"] == 1024 and amx["int8"] == 2048


def test_cpu_int8_rate_only_with_vnni():
    assert "int8" not in cpu_flop_per_clock_per_core("AVX2")
    assert cpu_flop_per_clock_per_core("AVX2", ["avx_vnni"])["int8"] == 128


def test_cpu_unknown_isa_is_rejected():
    with pytest.raises(ValueError, match="unknown CPU ISA level 'AVX1024'"):
        cpu_flop_per_clock_per_core("AVX1024")
