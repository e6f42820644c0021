"""Theoretical peak throughput: per-architecture rates and per-product datasheet clocks.

peak (TFLOPS) = compute units x clock (MHz) x FLOP per clock per unit / 1e6

* FLOP per clock per unit is a property of the architecture (one FMA = 2 FLOP), dense
  (no 2:4 sparsity), on the fastest units that do the precision: tensor / matrix cores
  where the architecture has them, vector units otherwise.  ``int8`` is in ops (TOPS).
* The clock is the one the vendor's datasheet uses for its peak figures, kept per product
  in :data:`PRODUCT_CLOCKS`.  Since Hopper NVIDIA quotes two: the CUDA-core fp32/fp64 rates
  at the boost clock (H100 SXM 1980 MHz) and the tensor rates at a lower clock (1830 MHz).
  A product row carries both; an architecture names the precisions quoted at the boost
  clock (:attr:`ArchitectureThroughput.boost_clock_precisions`).
* For a product missing from the table, adapters take the driver's maximum clock (which is
  the boost clock) and scale the tensor precisions by the architecture's datasheet ratio of
  tensor to boost clock (:attr:`ArchitectureThroughput.tensor_to_boost_clock`), so an
  unlisted Hopper reads ~989 TFLOPS bf16, not the 1070 the raw boost clock would claim.
  ``HardwareCapabilities.details["clock_source"]`` says which path was taken.

Every figure is theoretical.  The datasheet figures the tables reproduce are in the
``provenance`` / ``source`` of each entry and in tests/hal/test_peak_flops.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Mapping, Optional, Sequence, Tuple, Union

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
    "datasheet_clocks",
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
    boost_clock_precisions: FrozenSet[str] = frozenset()
    """Precisions the vendor quotes at the boost clock rather than the tensor clock
    (Hopper and Blackwell fp32/fp64, which run on CUDA cores or at their clock)."""
    tensor_to_boost_clock: float = 1.0
    """Datasheet tensor clock / boost clock, used to estimate the tensor clock of a
    product missing from :data:`PRODUCT_CLOCKS` from the driver's maximum clock."""


def _arch(vendor, architecture, unit, rates, provenance, boost=(), ratio=1.0) -> ArchitectureThroughput:
    return ArchitectureThroughput(HardwareVendor(vendor), architecture, unit, dict(rates), provenance,
                                  frozenset(boost), ratio)


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
        # Jetson Orin's GA10B: Ampere-class tensor cores (A100 rates), 128 FP32 lanes per SM.
        _arch("nvidia", "ampere-orin", "SM",
           {"fp32": 256, "tf32": 1024, "fp16": 2048, "bf16": 2048, "int8": 4096},
           "Jetson AGX Orin 64GB: 16 SM x 1300 MHz -> 5.3 fp32 / 85 int8 TOPS dense "
           "(170 sparse)"),
        _arch("nvidia", "hopper", "SM",
           {"fp64": 256, "fp32": 256, "tf32": 2048, "fp16": 4096, "bf16": 4096, "fp8": 8192,
            "int8": 8192},
           "H100 SXM: 132 SM x 1830 MHz -> 494.7 tf32 / 989.4 bf16 / 1978.9 fp8 / 1978.9 int8, "
           "x 1980 MHz boost -> 66.9 fp32 / 66.9 fp64 tensor; "
           "H100 PCIe: 114 SM x 1620 MHz -> 756 bf16, x 1755 MHz -> 51.2 fp32",
           boost=("fp64", "fp32"), ratio=1830 / 1980),
        _arch("nvidia", "blackwell", "SM",
           {"fp64": 128, "fp32": 256, "tf32": 4096, "fp16": 8192, "bf16": 8192, "fp8": 16384,
            "int8": 16384},
           "HGX B200: 148 SM x 1856 MHz -> 1125 tf32 / 2250 bf16 / 4500 fp8 dense, "
           "x 1980 MHz -> 75 fp32 / 37 fp64",
           boost=("fp64", "fp32"), ratio=1856 / 1980),
        # Blackwell Ultra (B300) keeps B200's tensor rates but has almost no FP64 (the HGX
        # B300 datasheet: 1.25 TF) and cut INT8; both are left out rather than guessed.
        _arch("nvidia", "blackwell-ultra", "SM",
           {"fp32": 256, "tf32": 4096, "fp16": 8192, "bf16": 8192, "fp8": 16384},
           "HGX B300: 148 SM x 1856 MHz -> 2250 bf16 / 4500 fp8 dense, x 1980 MHz -> 75 fp32",
           boost=("fp32",), ratio=1856 / 1980),
        # GB20x (RTX 50 series, RTX PRO Blackwell): Ada-like SM, fp8 on the tensor cores.
        _arch("nvidia", "blackwell-rtx", "SM",
           {"fp64": 4, "fp32": 256, "tf32": 512, "fp16": 1024, "bf16": 1024, "fp8": 2048,
            "int8": 2048},
           "RTX PRO 6000 Blackwell: 188 SM x 2617 MHz -> 126 fp32 / 1008 fp8 dense "
           "(4000 AI TOPS = fp4 sparse)"),
        _arch("nvidia", "blackwell-rtx-geforce", "SM",
           {"fp64": 4, "fp32": 256, "tf32": 256, "fp16": 512, "bf16": 512, "fp8": 1024,
            "int8": 2048},
           "RTX 5090: 170 SM x 2407 MHz -> 104.8 fp32 / 209.5 fp16 (fp32 accumulate) / "
           "419 fp8 / 838 int8 TOPS"),
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
    "ampere-orin": 128, "ada": 128, "ada-geforce": 128, "hopper": 128, "blackwell": 128,
    "blackwell-ultra": 128, "blackwell-rtx": 128, "blackwell-rtx-geforce": 128,
}

_NVIDIA_CC_TO_ARCH = {
    "7.0": "volta", "7.2": "volta", "7.5": "turing", "8.0": "ampere", "8.6": "ampere-ga10x",
    "8.7": "ampere-orin", "8.9": "ada", "9.0": "hopper", "10.0": "blackwell",
    "10.3": "blackwell-ultra", "12.0": "blackwell-rtx",
}
_GEFORCE_VARIANTS = ("ampere-ga10x", "ada", "blackwell-rtx")


def nvidia_architecture(compute_capability: str, device_name: str = "") -> Optional[str]:
    """Architecture key for an NVIDIA compute capability such as ``"9.0"``.

    GeForce boards of compute capability 8.6/8.9/12.0 get the ``-geforce`` variant
    (half-rate fp32-accumulate tensor math).  Returns None for a capability not in the
    tables.
    """
    arch = _NVIDIA_CC_TO_ARCH.get(compute_capability)
    if arch in _GEFORCE_VARIANTS and "geforce" in device_name.lower():
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
    """Datasheet clocks of products whose names match ``pattern`` (case-insensitive)."""

    vendor: HardwareVendor
    pattern: str
    clock_mhz: float
    """The clock the datasheet's tensor / matrix figures imply (for most products the one
    clock behind every figure)."""
    product: str
    boost_clock_mhz: Optional[float] = None
    """The clock behind the figures of the architecture's ``boost_clock_precisions``
    (Hopper/Blackwell fp32 and fp64); None when the datasheet uses ``clock_mhz`` for all."""
    compute_units: Optional[int] = None
    """Only match devices with this many SMs/CUs (products sharing one reported name,
    e.g. every Jetson Orin reports "Orin")."""

    def clock_for(self, precision: str, boost_precisions: FrozenSet[str]) -> float:
        """MHz behind this product's datasheet figure for ``precision``."""
        if precision in boost_precisions and self.boost_clock_mhz is not None:
            return self.boost_clock_mhz
        return self.clock_mhz


def _clocks(vendor: str, rows: Sequence[tuple]) -> Tuple[ProductClock, ...]:
    return tuple(ProductClock(HardwareVendor(vendor), *row) for row in rows)


#: First match wins, so more specific patterns come first.  Names are as the vendor API
#: reports them (NVML / torch.cuda / torch.xpu / sysctl).  NVIDIA's newer datasheets give
#: no clock; the clocks here are the ones their dense figures imply for the SM count
#: (e.g. H100 SXM bf16 989.4 TF / (132 SM x 4096) = 1830 MHz; fp32 67 TF / (132 x 256) =
#: 1980 MHz), and tests/hal/test_peak_flops.py checks each figure.
PRODUCT_CLOCKS: Tuple[ProductClock, ...] = (
    *_clocks("nvidia", [
        # (pattern, tensor clock, product, boost clock for fp32/fp64, SM count filter)
        (r"H100.*PCIe", 1620, "H100 PCIe (756 TF bf16; 51 TF fp32 at its 1755 MHz boost)", 1755),
        (r"H[12]00 NVL", 1545, "H100 NVL / H200 NVL (835 TF bf16, 60 TF fp32)", 1785),
        (r"H100.*(HBM3|SXM)", 1830, "H100 SXM", 1980),
        (r"\bGH200\b", 1830, "GH200 Grace Hopper Superchip (H100 SXM figures)", 1980),
        (r"(?<!G)\bH200\b", 1830, "H200 SXM", 1980),
        (r"\bB300\b", 1856, "B300 (HGX B300: 2250 TF bf16, 75 TF fp32)", 1980),
        (r"\bB200\b", 1856, "B200 (HGX B200: 2250 TF bf16, 75 TF fp32, 37 TF fp64)", 1980),
        (r"A100", 1410, "A100 (SXM4 and PCIe)"),
        (r"L40S", 2520, "L40S"),
        (r"\bL4\b", 2040, "L4"),
        (r"\bA40\b", 1740, "A40"),
        (r"\bA10\b", 1695, "A10"),
        (r"V100.*SXM2", 1530, "V100 SXM2"),
        (r"V100.*PCIE", 1380, "V100 PCIe"),
        (r"\bT4\b", 1590, "T4"),
        (r"RTX PRO 6000 Blackwell", 2617, "RTX PRO 6000 Blackwell"),
        (r"RTX 5090", 2407, "GeForce RTX 5090"),
        (r"RTX 5080", 2617, "GeForce RTX 5080"),
        (r"RTX 4090", 2520, "GeForce RTX 4090"),
        (r"RTX 3090(?! Ti)", 1695, "GeForce RTX 3090"),
        # Every Jetson Orin reports "Orin"; the SM count tells the modules apart.
        (r"\bOrin\b", 1300, "Jetson AGX Orin 64GB", None, 16),
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


def datasheet_clocks(vendor: Union[str, HardwareVendor], device_name: str,
                     compute_units: Optional[int] = None) -> Optional[ProductClock]:
    """The :data:`PRODUCT_CLOCKS` row of a product by its reported name (and, for rows
    that need it, its SM/CU count); None if the table lacks it."""
    vendor = HardwareVendor.parse(vendor)
    for row in PRODUCT_CLOCKS:
        if row.vendor is not vendor or not re.search(row.pattern, device_name, re.IGNORECASE):
            continue
        if row.compute_units is not None and row.compute_units != compute_units:
            continue
        return row
    return None


def datasheet_clock_mhz(vendor: Union[str, HardwareVendor], device_name: str,
                        compute_units: Optional[int] = None) -> Optional[float]:
    """Datasheet (tensor) clock, MHz, of a product by its reported name; None if not in
    the table.  See :func:`datasheet_clocks` for the boost clock as well."""
    row = datasheet_clocks(vendor, device_name, compute_units)
    return None if row is None else row.clock_mhz


def theoretical_peak_tflops(vendor: Union[str, HardwareVendor], architecture: str,
                            compute_units: int, clock_mhz: float,
                            boost_clock_mhz: Optional[float] = None) -> Dict[str, float]:
    """Dense theoretical peak per precision, in TFLOPS (TOPS for ``int8``).

    Args:
        vendor: the device's vendor (name or :class:`HardwareVendor`).
        architecture: a table key, e.g. ``"hopper"``, ``"gfx942"``, ``"xe-hpc"``.
        compute_units: SMs / CUs / EUs / cores of this device.
        clock_mhz: the datasheet (tensor) clock in MHz (see :func:`datasheet_clocks`).
        boost_clock_mhz: the clock, MHz, for the architecture's
            ``boost_clock_precisions`` (Hopper/Blackwell fp32, fp64); None uses
            ``clock_mhz`` for every precision.

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
    peak = peak_from_rates(entry.flop_per_clock_per_unit, compute_units, clock_mhz)
    if boost_clock_mhz is not None and entry.boost_clock_precisions:
        boosted = {k: v for k, v in entry.flop_per_clock_per_unit.items()
                   if k in entry.boost_clock_precisions}
        peak.update(peak_from_rates(boosted, compute_units, boost_clock_mhz))
    return peak


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
