"""Peak tables checked against vendors' datasheet figures (dense, theoretical)."""

import pytest

from kernel_pytorch.hardware_abstraction import HardwareVendor
from kernel_pytorch.hardware_abstraction.peak_flops import (
    ARCHITECTURES,
    NVIDIA_CORES_PER_SM,
    cpu_flop_per_clock_per_core,
    datasheet_clock_mhz,
    datasheet_clocks,
    nvidia_architecture,
    theoretical_peak_tflops,
)

# Datasheets the rows below come from (dense figures; sparse ones halved where a sheet gives
# only "with sparsity").
H100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), SXM / PCIe / NVL columns"
H200 = "NVIDIA H200 Tensor Core GPU datasheet (2024), SXM / NVL columns"
GH200 = "NVIDIA GH200 Grace Hopper Superchip datasheet (2023)"
B200 = "NVIDIA HGX B200 datasheet (2025), 8 GPUs: 18 PF tf32, 36 PF bf16, 72 PF fp8/int8 sparse, 600 TF fp32, 296 TF fp64"
B300 = "NVIDIA HGX B300 datasheet (2025), 8 GPUs: 36 PF bf16, 72 PF fp8 sparse, 600 TF fp32"
A100 = "NVIDIA A100 Tensor Core GPU datasheet (2021)"
V100 = "NVIDIA V100 Tensor Core GPU datasheet (2020)"
T4 = "NVIDIA T4 datasheet (2019)"
L40S = "NVIDIA L40S datasheet (2023)"
A40 = "NVIDIA A40 datasheet (2020)"
ADA = "NVIDIA Ada GPU architecture whitepaper v2.1, RTX 4090 column"
RTX50 = "NVIDIA RTX Blackwell GPU architecture whitepaper v1.0, RTX 5090 column"
RTXPRO = "NVIDIA RTX PRO 6000 Blackwell datasheet (2025): 125 TF fp32, 4000 AI TOPS (fp4 sparse)"
ORIN = "NVIDIA Jetson AGX Orin series datasheet DS-10662: 2048 cores, 1.3 GHz, 5.32 TF fp32, 170 TOPS int8 sparse (GPU)"
MI300X = "AMD Instinct MI300X datasheet (2023)"
MI250X = "AMD Instinct MI250X datasheet (2021)"
MI210 = "AMD Instinct MI210 datasheet (2022)"
MI355X = "AMD Instinct MI355X datasheet (2025)"
MAX1550 = "Intel Data Center GPU Max 1550 product brief (2023)"

# (vendor, architecture, units, product name as the vendor API reports it, precision,
#  datasheet TFLOPS/TOPS dense, source)
DATASHEET = [
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "fp64", 67.0, H100),   # fp64 tensor core
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "fp32", 67.0, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "tf32", 494.7, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "bf16", 989.4, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "fp16", 989.4, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "fp8", 1978.9, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 80GB HBM3", "int8", 1978.9, H100),
    ("nvidia", "hopper", 114, "NVIDIA H100 PCIe", "fp64", 51.0, H100),
    ("nvidia", "hopper", 114, "NVIDIA H100 PCIe", "fp32", 51.0, H100),
    ("nvidia", "hopper", 114, "NVIDIA H100 PCIe", "tf32", 378.0, H100),
    ("nvidia", "hopper", 114, "NVIDIA H100 PCIe", "bf16", 756.0, H100),
    ("nvidia", "hopper", 114, "NVIDIA H100 PCIe", "fp8", 1513.0, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 NVL", "fp64", 60.0, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 NVL", "fp32", 60.0, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 NVL", "bf16", 835.5, H100),
    ("nvidia", "hopper", 132, "NVIDIA H100 NVL", "fp8", 1670.5, H100),
    ("nvidia", "hopper", 132, "NVIDIA H200", "fp64", 67.0, H200),
    ("nvidia", "hopper", 132, "NVIDIA H200", "fp32", 67.0, H200),
    ("nvidia", "hopper", 132, "NVIDIA H200", "tf32", 494.7, H200),
    ("nvidia", "hopper", 132, "NVIDIA H200", "bf16", 989.4, H200),
    ("nvidia", "hopper", 132, "NVIDIA H200", "fp8", 1978.9, H200),
    ("nvidia", "hopper", 132, "NVIDIA H200 NVL", "fp32", 60.0, H200),
    ("nvidia", "hopper", 132, "NVIDIA H200 NVL", "bf16", 835.5, H200),
    ("nvidia", "hopper", 132, "NVIDIA GH200 480GB", "fp64", 67.0, GH200),
    ("nvidia", "hopper", 132, "NVIDIA GH200 480GB", "fp32", 67.0, GH200),
    ("nvidia", "hopper", 132, "NVIDIA GH200 480GB", "bf16", 989.4, GH200),
    ("nvidia", "blackwell", 148, "NVIDIA B200", "fp64", 37.0, B200),
    ("nvidia", "blackwell", 148, "NVIDIA B200", "fp32", 75.0, B200),
    ("nvidia", "blackwell", 148, "NVIDIA B200", "tf32", 1125.0, B200),
    ("nvidia", "blackwell", 148, "NVIDIA B200", "bf16", 2250.0, B200),
    ("nvidia", "blackwell", 148, "NVIDIA B200", "fp8", 4500.0, B200),
    ("nvidia", "blackwell", 148, "NVIDIA B200", "int8", 4500.0, B200),
    ("nvidia", "blackwell-ultra", 148, "NVIDIA B300 SXM6 AC", "fp32", 75.0, B300),
    ("nvidia", "blackwell-ultra", 148, "NVIDIA B300 SXM6 AC", "bf16", 2250.0, B300),
    ("nvidia", "blackwell-ultra", 148, "NVIDIA B300 SXM6 AC", "fp8", 4500.0, B300),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "bf16", 312.0, A100),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "tf32", 156.0, A100),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "fp32", 19.5, A100),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "fp64", 19.5, A100),
    ("nvidia", "ampere", 108, "NVIDIA A100-SXM4-80GB", "int8", 624.0, A100),
    ("nvidia", "ampere-orin", 16, "Orin", "fp32", 5.32, ORIN),
    ("nvidia", "ampere-orin", 16, "Orin", "int8", 85.0, ORIN),
    ("nvidia", "volta", 80, "Tesla V100-SXM2-16GB", "fp32", 15.7, V100),
    ("nvidia", "volta", 80, "Tesla V100-SXM2-16GB", "fp16", 125.0, V100),
    ("nvidia", "turing", 40, "Tesla T4", "fp16", 65.0, T4),
    ("nvidia", "ada", 142, "NVIDIA L40S", "bf16", 362.05, L40S),
    ("nvidia", "ada", 142, "NVIDIA L40S", "fp32", 91.6, L40S),
    ("nvidia", "ampere-ga10x", 84, "NVIDIA A40", "fp16", 149.7, A40),
    ("nvidia", "ada-geforce", 128, "NVIDIA GeForce RTX 4090", "fp32", 82.6, ADA),
    ("nvidia", "ada-geforce", 128, "NVIDIA GeForce RTX 4090", "fp16", 165.2, ADA),
    ("nvidia", "ada-geforce", 128, "NVIDIA GeForce RTX 4090", "fp8", 330.3, ADA),
    ("nvidia", "blackwell-rtx-geforce", 170, "NVIDIA GeForce RTX 5090", "fp32", 104.8, RTX50),
    ("nvidia", "blackwell-rtx-geforce", 170, "NVIDIA GeForce RTX 5090", "tf32", 104.8, RTX50),
    ("nvidia", "blackwell-rtx-geforce", 170, "NVIDIA GeForce RTX 5090", "fp16", 209.5, RTX50),
    ("nvidia", "blackwell-rtx-geforce", 170, "NVIDIA GeForce RTX 5090", "fp8", 419.0, RTX50),
    ("nvidia", "blackwell-rtx-geforce", 170, "NVIDIA GeForce RTX 5090", "int8", 838.0, RTX50),
    ("nvidia", "blackwell-rtx", 188, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "fp32", 125.0, RTXPRO),
    ("nvidia", "blackwell-rtx", 188, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "fp8", 1000.0, RTXPRO),
    ("amd", "gfx942", 304, "AMD Instinct MI300X", "bf16", 1307.4, MI300X),
    ("amd", "gfx942", 304, "AMD Instinct MI300X", "fp8", 2614.9, MI300X),
    ("amd", "gfx942", 304, "AMD Instinct MI300X", "fp64", 163.4, MI300X),
    ("amd", "gfx90a", 220, "AMD Instinct MI250X", "bf16", 383.0, MI250X),
    ("amd", "gfx90a", 104, "AMD Instinct MI210", "bf16", 181.0, MI210),
    ("amd", "gfx950", 256, "AMD Instinct MI355X", "bf16", 2516.6, MI355X),
    ("intel", "xe-hpc", 1024, "Intel(R) Data Center GPU Max 1550", "bf16", 839.0, MAX1550),
    ("intel", "xe-hpc", 1024, "Intel(R) Data Center GPU Max 1550", "fp64", 52.4, MAX1550),
]


@pytest.mark.parametrize("vendor, arch, units, product, precision, datasheet, source", DATASHEET,
                         ids=[f"{row[3]}-{row[4]}" for row in DATASHEET])
def test_table_reproduces_datasheet_within_two_percent(vendor, arch, units, product, precision,
                                                       datasheet, source):
    row = datasheet_clocks(vendor, product, units)
    assert row is not None, f"{product} missing from PRODUCT_CLOCKS ({source})"
    peak = theoretical_peak_tflops(vendor, arch, units, row.clock_mhz, row.boost_clock_mhz)[precision]
    assert peak == pytest.approx(datasheet, rel=0.02), source


@pytest.mark.parametrize("cc, product, arch", [
    ("9.0", "NVIDIA H100 80GB HBM3", "hopper"), ("10.0", "NVIDIA B200", "blackwell"),
    ("10.3", "NVIDIA B300 SXM6 AC", "blackwell-ultra"), ("8.7", "Orin", "ampere-orin"),
    ("12.0", "NVIDIA GeForce RTX 5090", "blackwell-rtx-geforce"),
    ("12.0", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "blackwell-rtx"),
])
def test_datasheet_rows_use_the_architecture_of_their_compute_capability(cc, product, arch):
    assert nvidia_architecture(cc, product) == arch


def test_h100_tensor_figures_use_datasheet_clock_not_boost_clock():
    row = datasheet_clocks("nvidia", "NVIDIA H100 80GB HBM3")
    assert (row.clock_mhz, row.boost_clock_mhz) == (1830, 1980)
    boost = theoretical_peak_tflops("nvidia", "hopper", 132, 1980)["bf16"]
    assert boost > 1050  # what the NVML max clock alone would claim


def test_gh200_has_its_own_row_and_is_not_matched_as_h200():
    assert "GH200" in datasheet_clocks("nvidia", "NVIDIA GH200 480GB").product
    assert datasheet_clocks("nvidia", "NVIDIA H200").product == "H200 SXM"


def test_jetson_orin_rows_match_by_sm_count():
    # Every Orin module reports "Orin"; only the 16-SM AGX Orin 64GB clock is tabled.
    assert datasheet_clock_mhz("nvidia", "Orin", 16) == 1300
    assert datasheet_clock_mhz("nvidia", "Orin", 8) is None


@pytest.mark.parametrize("product", ["NVIDIA Graphics Device", "NVIDIA H20", "NVIDIA GeForce RTX 3090 Ti"])
def test_products_without_a_known_datasheet_clock_are_not_guessed(product):
    assert datasheet_clock_mhz("nvidia", product) is None


def test_unlisted_hopper_tensor_clock_ratio_reproduces_the_sxm_datasheet():
    hopper = ARCHITECTURES[(HardwareVendor.NVIDIA, "hopper")]
    assert hopper.boost_clock_precisions == {"fp32", "fp64"}
    peak = theoretical_peak_tflops("nvidia", "hopper", 132, 1980 * hopper.tensor_to_boost_clock, 1980)
    assert peak["bf16"] == pytest.approx(989.4, rel=0.001) and peak["fp32"] == pytest.approx(66.9, rel=0.01)


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
    ("8.6", "NVIDIA GeForce RTX 3090", "ampere-ga10x-geforce"), ("13.0", "future", None),
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
