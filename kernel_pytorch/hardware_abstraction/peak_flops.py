"""Theoretical peak throughput: per-architecture rates and per-product datasheet clocks.

peak (TFLOPS) = compute units x clock (MHz) x FLOP per clock per unit / 1e6

* FLOP per clock per unit is a property of the architecture (one FMA = 2 FLOP), dense
  (no 2:4 sparsity), on the fastest units that do the precision: tensor / matrix cores
  where the architecture has them, vector units otherwise.  ``int8`` is in ops (TOPS).
* The clock is the one the vendor's datasheet uses for its peak figures (sustained /
  "boost for tensor ops"), kept per product in small tables below.  The maximum clock a
  driver reports is higher (H100 SXM: 1980 MHz vs 1830 MHz) and would overstate the peak
  by ~8%; adapters only fall back to it for unknown products and say so in
  ``HardwareCapabilities.details["clock_source"]``.

Every figure is theoretical.  The datasheet checks the tables were built from are in the
``provenance`` of each entry and in tests/hal/test_peak_flops.py.  One known deviation:
NVIDIA quotes Hopper's non-tensor FP32/FP64 at 1980 MHz but its tensor figures at
1830 MHz; this module uses one clock per product (the tensor one), so Hopper fp32/fp64
read ~8% under the datasheet (conservative).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

from .hal_core import PRECISIONS, HardwareVendor

__all__ = [
    "ArchitectureThroughput",
    "ProductClock",
    "ARCHITECTURES",
    "PRODUCT_CLOCKS",
    "NVIDIA_CORES_PER_SM",
    "architecture_throughput",
    "nvidia_architecture",
    "datasheet_clock_mhz",
    "theoretical_peak_tflops",
    "cpu_flop_per_clock_per_core",
]


@dataclass(frozen=True)
class ArchitectureThroughput:
    """Dense FLOP (ops for int8) per clock per compute unit, for one architecture."""

    vendor: HardwareVendor
    architecture: str
    unit: str
    """What one compute unit is: "SM", "CU", "EU", "GPU core", "core"."""
    flop_per_clock_per_unit: Mapping[str, float]
    provenance: str
    """Which datasheet figures the rates reproduce (units x clock x rate)."""


def _arch(vendor, architecture, unit, rates, provenance) -> ArchitectureThroughput:
    return ArchitectureThroughput(HardwareVendor(vendor), architecture, unit, dict(rates), provenance)


#: Keyed by (vendor, architecture).  NVIDIA keys are the names :func:`nvidia_architecture`
#: returns for a compute capability; AMD keys are gcnArchName base names (gfx942).
ARCHITECTURES: Dict[Tuple[HardwareVendor, str], ArchitectureThroughput] = {
    (a.vendor, a.architecture): a
    for a in (
        # ---- NVIDIA, per SM per clock ----
        _arch("nvidia", "volta", "SM",
           {"fp64": 64, "fp32": 128, "fp16": 1024},
           "V100 SXM2: 80 SM x 1530 MHz -> 7.8 fp64 / 15.7 fp32 / 125 fp16 tensor"),
        _arch("nvidia", "turing", "SM",
           {"fp64": 4, "fp32": 128, "fp16": 1024, "int8": 2048},
           "T4: 40 SM x 1590 MHz -> 8.1 fp32 / 65 fp16 / 130 int8 TOPS"),
        _arch("nvidia", "ampere", "SM",
           {"fp64": 128, "fp32": 128, "tf32": 1024, "fp16": 2048, "bf16": 2048, "int8": 4096},
           "A100: 108 SM x 1410 MHz -> 19.5 fp64 tensor / 19.5 fp32 / 156 tf32 / 312 bf16 / 624 int8"),
        _arch("nvidia", "ampere-ga10x", "SM",
           {"fp64": 4, "fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "int8": 2048},
           "A40: 84 SM x 1740 MHz -> 37.4 fp32 / 74.8 tf32 / 149.7 fp16 / 299.3 int8"),
        # GeForce boards run fp16/bf16 tensor ops with fp32 accumulation at half rate.
        _arch("nvidia", "ampere-ga10x-geforce", "SM",
           {"fp64": 4, "fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "int8": 2048},
           "RTX 3090: 82 SM x 1695 MHz -> 35.6 fp32 / 71 fp16 (fp32 accumulate)"),
        _arch("nvidia", "ada", "SM",
           {"fp64": 4, "fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp8": 2048,
            "int8": 2048},
           "L40S: 142 SM x 2520 MHz -> 91.6 fp32 / 183 tf32 / 362 bf16 / 733 fp8"),
        _arch("nvidia", "ada-geforce", "SM",
           {"fp64": 4, "fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp8": 1024,
            "int8": 2048},
           "RTX 4090: 128 SM x 2520 MHz -> 82.6 fp32 / 165 fp16 (fp32 accumulate)"),
        _arch("nvidia", "hopper", "SM",
           {"fp64": 256, "fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096, "fp8": 8192,
            "int8": 8192},
           "H100 SXM: 132 SM x 1830 MHz -> 494.7 tf32 / 989.4 bf16 / 1978.9 fp8 / 1978.9 int8; "
           "H100 PCIe: 114 SM x 1620 MHz -> 756 bf16"),
        _arch("nvidia", "blackwell", "SM",
           {"fp64": 128, "fp32": 256, "tf32": 4096, "fp16": 8192, "bf16": 8192, "fp8": 16384,
            "int8": 16384},
           "B200: 148 SM, 2x Hopper tensor rate per SM per clock -> ~2250 bf16 dense"),
        # ---- AMD, per CU per clock (gcnArchName) ----
        _arch("amd", "gfx90a", "CU",
           {"fp64": 256, "fp32": 256, "fp16": 1024, "bf16": 1024, "int8": 1024},
           "MI250X: 220 CU x 1700 MHz -> 95.7 fp64 matrix / 95.7 fp32 packed / 383 bf16 / 383 int8"),
        _arch("amd", "gfx942", "CU",
           {"fp64": 256, "fp32": 256, "tf32": 1024, "fp16": 2048, "bf16": 2048, "fp8": 4096,
            "int8": 4096},
           "MI300X: 304 CU x 2100 MHz -> 163.4 fp64 matrix / 653.7 tf32 / 1307.4 bf16 / 2614.9 fp8"),
        _arch("amd", "gfx950", "CU",
           {"fp64": 128, "fp32": 256, "fp16": 4096, "bf16": 4096, "fp8": 8192, "int8": 8192},
           "MI355X: 256 CU x 2400 MHz -> 78.6 fp64 / 157.3 fp32 / 2516.6 bf16 / 5033 fp8"),
        # ---- Intel GPUs, per Xe vector engine (EU) per clock ----
        _arch("intel", "xe-hpc", "EU",
           {"fp64": 32, "fp32": 32, "tf32": 256, "fp16": 512, "bf16": 512, "int8": 1024},
           "Max 1550: 1024 EU x 1600 MHz -> 52.4 fp64 / 52.4 fp32 / 419 tf32 / 839 bf16 / 1678 int8"),
        _arch("intel", "xe-hpg", "EU",
           {"fp32": 16, "fp16": 128, "bf16": 128, "int8": 256},
           "Arc A770: 512 EU x 2100 MHz -> 17.2 fp32 / 137.6 fp16 XMX / 275 int8"),
        # ---- Apple GPUs, per GPU core (128 ALUs) per clock; fp16 runs at the fp32 rate ----
        _arch("apple", "apple-gpu", "GPU core",
           {"fp32": 256, "fp16": 256, "bf16": 256},
           "M1: 8 cores x 1278 MHz -> 2.6 fp32; M2: 10 cores x 1398 MHz -> 3.6 fp32"),
    )
}

#: CUDA cores (FP32 lanes) per SM: NVML reports cores, not SMs (nvmlDeviceGetNumGpuCores).
NVIDIA_CORES_PER_SM: Dict[str, int] = {
    "volta": 64, "turing": 64, "ampere": 64, "ampere-ga10x": 128, "ampere-ga10x-geforce": 128,
    "ada": 128, "ada-geforce": 128, "hopper": 128, "blackwell": 128,
}

_NVIDIA_CC_TO_ARCH = {
    "7.0": "volta", "7.2": "volta", "7.5": "turing", "8.0": "ampere", "8.6": "ampere-ga10x",
    "8.9": "ada", "9.0": "hopper", "10.0": "blackwell",
}


def nvidia_architecture(compute_capability: str, device_name: str = "") -> Optional[str]:
    """Architecture key for an NVIDIA compute capability such as ``"9.0"``.

    GeForce boards of compute capability 8.6/8.9 get the ``-geforce`` variant (half-rate
    fp32-accumulate tensor math).  Returns None for a capability not in the tables.
    """
    arch = _NVIDIA_CC_TO_ARCH.get(compute_capability)
    if arch in ("ampere-ga10x", "ada") and "geforce" in device_name.lower():
        arch += "-geforce"
    return arch


def architecture_throughput(vendor: Union[str, HardwareVendor],
                            architecture: str) -> Optional[ArchitectureThroughput]:
    """The table entry for ``(vendor, architecture)``, or None if the tables lack it.

    AMD architecture names may carry target features (``gfx90a:sramecc+:xnack-``); only
    the base name is used.
    """
    vendor = HardwareVendor.parse(vendor)
    if vendor is HardwareVendor.AMD:
        architecture = architecture.split(":", 1)[0]
    return ARCHITECTURES.get((vendor, architecture))


@dataclass(frozen=True)
class ProductClock:
    """Datasheet clock of products whose names match ``pattern`` (case-insensitive)."""

    vendor: HardwareVendor
    pattern: str
    clock_mhz: float
    product: str


def _clocks(vendor: str, rows: Sequence[Tuple[str, float, str]]) -> Tuple[ProductClock, ...]:
    return tuple(ProductClock(HardwareVendor(vendor), p, mhz, prod) for p, mhz, prod in rows)


#: First match wins, so more specific patterns come first.  Names are as the vendor API
#: reports them (NVML / torch.cuda / torch.xpu / sysctl).  Patterns exclude slower
#: variants that share a name stem (H100 NVL, H200 NVL) so those fall back to the
#: driver-reported clock instead of borrowing the SXM one.
PRODUCT_CLOCKS: Tuple[ProductClock, ...] = (
    *_clocks("nvidia", [
        (r"H100.*PCIe", 1620, "H100 PCIe (datasheet 756 TF bf16; its 1755 MHz is the boost clock)"),
        (r"H100.*(HBM3|SXM)", 1830, "H100 SXM"),
        (r"H200(?!.*NVL)", 1830, "H200 SXM"),
        (r"A100", 1410, "A100 (SXM4 and PCIe)"),
        (r"L40S", 2520, "L40S"),
        (r"\bL4\b", 2040, "L4"),
        (r"\bA40\b", 1740, "A40"),
        (r"\bA10\b", 1695, "A10"),
        (r"V100.*SXM2", 1530, "V100 SXM2"),
        (r"V100.*PCIE", 1380, "V100 PCIe"),
        (r"\bT4\b", 1590, "T4"),
        (r"RTX 4090", 2520, "GeForce RTX 4090"),
        (r"RTX 3090(?! Ti)", 1695, "GeForce RTX 3090"),
    ]),
    *_clocks("amd", [
        (r"MI355X", 2400, "Instinct MI355X"),
        (r"MI325X", 2100, "Instinct MI325X"),
        (r"MI300X", 2100, "Instinct MI300X"),
        (r"MI300A", 2100, "Instinct MI300A"),
        (r"MI250X", 1700, "Instinct MI250X"),
        (r"MI250", 1700, "Instinct MI250"),
        (r"MI210", 1700, "Instinct MI210"),
    ]),
    *_clocks("intel", [
        (r"Max 1550", 1600, "Data Center GPU Max 1550"),
        (r"Max 1100", 1550, "Data Center GPU Max 1100"),
        (r"Arc\(TM\) A770|Arc A770", 2100, "Arc A770"),
    ]),
    *_clocks("apple", [
        (r"Apple M1", 1278, "Apple M1 family"),
        (r"Apple M2", 1398, "Apple M2 family"),
    ]),
)


def datasheet_clock_mhz(vendor: Union[str, HardwareVendor], device_name: str) -> Optional[float]:
    """Datasheet clock (MHz) of a product by its reported name; None if not in the table."""
    vendor = HardwareVendor.parse(vendor)
    for row in PRODUCT_CLOCKS:
        if row.vendor is vendor and re.search(row.pattern, device_name, re.IGNORECASE):
            return row.clock_mhz
    return None


def theoretical_peak_tflops(vendor: Union[str, HardwareVendor], architecture: str,
                            compute_units: int, clock_mhz: float) -> Dict[str, float]:
    """Dense theoretical peak per precision, in TFLOPS (TOPS for ``int8``).

    Args:
        vendor: the device's vendor (name or :class:`HardwareVendor`).
        architecture: a table key, e.g. ``"hopper"``, ``"gfx942"``, ``"xe-hpc"``.
        compute_units: SMs / CUs / EUs / cores of this device.
        clock_mhz: the datasheet clock in MHz (see :func:`datasheet_clock_mhz`).

    Raises:
        ValueError: for an architecture not in :data:`ARCHITECTURES` (the message lists
            the known ones) or a non-positive unit count or clock.
    """
    entry = architecture_throughput(vendor, architecture)
    if entry is None:
        vendor = HardwareVendor.parse(vendor)
        known = sorted(a for v, a in ARCHITECTURES if v is vendor)
        raise ValueError(
            f"no peak-throughput table for {vendor.value} architecture {architecture!r}; "
            f"known: {', '.join(known) or 'none'} (add it to peak_flops.ARCHITECTURES)"
        )
    return peak_from_rates(entry.flop_per_clock_per_unit, compute_units, clock_mhz)


def peak_from_rates(flop_per_clock_per_unit: Mapping[str, float], compute_units: int,
                    clock_mhz: float) -> Dict[str, float]:
    """units x clock (MHz) x rate, in TFLOPS, for every precision in the rate mapping."""
    if compute_units <= 0 or clock_mhz <= 0:
        raise ValueError(
            f"peak throughput needs a positive unit count and clock, got "
            f"compute_units={compute_units}, clock_mhz={clock_mhz}"
        )
    unit_ghz = compute_units * clock_mhz / 1e3  # unit-GHz -> GFLOPS per FLOP/clk
    return {
        key: unit_ghz * flop_per_clock_per_unit[key] / 1e3
        for key in PRECISIONS if key in flop_per_clock_per_unit
    }


# CPU vector throughput, per physical core per clock.  Two FMA pipes is the common case on
# server x86 (Skylake-SP Gold/Platinum, Ice Lake, Sapphire Rapids, Zen 2-5); some parts
# have one 512-bit pipe, so AVX512 figures can read 2x high on those.
_CPU_FP32_FLOP_PER_CLOCK = {
    "AVX512": 2 * 16 * 2,      # 2 FMA pipes x 16 fp32 lanes x 2 FLOP
    "AVX2": 2 * 8 * 2,         # 2 FMA pipes x 8 lanes x 2
    "NO AVX": 4 + 4,           # SSE: one 4-wide add + one 4-wide mul, no FMA
    "DEFAULT": 2 * 4 * 2,      # aarch64 NEON: 2 x 128-bit FMA pipes
    "SVE128": 4 * 4 * 2,       # Neoverse V2: 4 x 128-bit FMA pipes
    "SVE256": 2 * 8 * 2,       # Neoverse V1: 2 x 256-bit FMA pipes
    "VSX": 2 * 4 * 2,          # POWER: 2 x 128-bit FMA pipes (conservative)
    "Z VECTOR": 2 * 4 * 2,
}


def cpu_flop_per_clock_per_core(isa: str, cpu_flags: Sequence[str] = ()) -> Dict[str, float]:
    """FLOP (ops for int8) per clock per physical core, from torch's ISA level and the
    CPU feature flags of /proc/cpuinfo.

    ``isa`` is ``torch.backends.cpu.get_cpu_capability()`` (``"AVX512"``, ``"AVX2"``, ...).
    fp16/bf16 run at the fp32 rate (convert, compute in fp32) unless the CPU has native
    instructions (avx512_bf16 / avx512_fp16: 2x; AMX tiles: 1024 bf16/fp16 FLOP and 2048
    int8 ops per clock).  int8 is listed only with VNNI or AMX, where its rate is known.

    Raises:
        ValueError: for an ISA name torch does not report.
    """
    isa_key = isa.upper()
    if isa_key not in _CPU_FP32_FLOP_PER_CLOCK:
        raise ValueError(
            f"unknown CPU ISA level {isa!r}; expected one of "
            f"{', '.join(sorted(_CPU_FP32_FLOP_PER_CLOCK))} "
            f"(as torch.backends.cpu.get_cpu_capability() reports)"
        )
    flags = {f.lower() for f in cpu_flags}
    fp32 = float(_CPU_FP32_FLOP_PER_CLOCK[isa_key])
    rates = {"fp64": fp32 / 2, "fp32": fp32, "fp16": fp32, "bf16": fp32}
    if "avx512_bf16" in flags:
        rates["bf16"] = 2 * fp32
    if "avx512_fp16" in flags:
        rates["fp16"] = 2 * fp32
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        rates["int8"] = 4 * fp32
    if "amx_bf16" in flags:
        rates["bf16"] = 1024.0
    if "amx_fp16" in flags:
        rates["fp16"] = 1024.0
    if "amx_int8" in flags:
        rates["int8"] = 2048.0
    return rates
