"""Core types of the Hardware Abstraction Layer (HAL).

A :class:`VendorAdapter` turns one vendor's discovery API into :class:`DeviceSpec`
records that carry :class:`HardwareCapabilities`, and carries the vendor's facts (torch
device type, process-group backend, aliases, priority) as class attributes.  This module
is the leaf of the HAL: it imports nothing else of kernel_pytorch.  The registry above it
(``registry.py``) loads the adapters and runs them; adapters import vendor runtimes lazily
inside ``discover_devices``, so importing the HAL costs nothing and creates no CUDA context.

Units used throughout: memory in GB = 1e9 bytes (decimal, as vendors' datasheets; names
end in ``_gb``), or GiB = 2^30 bytes where a name ends in ``_gib``; peak throughput in
TFLOPS = 1e12 floating-point operations per second (TOPS for int8), dense (no structured
sparsity), theoretical.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import torch

__all__ = [
    "HardwareVendor", "PRECISIONS", "precision_key", "DeviceLink", "HardwareCapabilities", "DeviceSpec",
    "VendorAdapter", "BYTES_PER_GB", "BYTES_PER_GIB",
]

#: Decimal gigabyte, the unit vendors print on datasheets (an "80 GB" H100 has 85.0e9 bytes
#: of HBM, of which the driver exposes ~79.6 GiB = 85.5 GB).  Names ending in ``_gb``.
BYTES_PER_GB = 1e9
#: Binary gibibyte (2^30 bytes), the unit of allocators and of ``free -g``.  Names ending
#: in ``_gib``.
BYTES_PER_GIB = 2**30

# Alias -> vendor lookup, installed by the adapter registry so that this leaf need not import it.
_vendor_aliases: Callable[[], Mapping[str, "HardwareVendor"]] = dict


def install_vendor_aliases(lookup: Callable[[], Mapping[str, "HardwareVendor"]]) -> None:
    """Called once by the adapter registry: where :meth:`HardwareVendor.parse` finds aliases."""
    global _vendor_aliases
    _vendor_aliases = lookup


class HardwareVendor(str, enum.Enum):
    """Who makes a device, which decides the adapter that discovers it."""

    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
    CPU = "cpu"
    CUSTOM_ASIC = "custom_asic"
    APPLE = "apple"
    OPENCL = "opencl"

    def __str__(self) -> str:
        # f"{vendor}" reads "nvidia", not "HardwareVendor.NVIDIA" (Python 3.11+ str enums).
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls, value: Union[str, "HardwareVendor"]) -> "HardwareVendor":
        """Return the vendor named by ``value`` (case-insensitive).

        Besides the enum values, each adapter's ``aliases`` are accepted (the torch
        device-type names: ``cuda`` -> NVIDIA, ``rocm``/``hip`` -> AMD, ``xpu`` -> INTEL,
        ``mps`` -> APPLE, ``my_asic``/``custom``/... -> CUSTOM_ASIC).

        Raises:
            ValueError: for an unknown name; the message lists every accepted name.
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, str):
            raise ValueError(
                f"HardwareVendor.parse expects a string or HardwareVendor, got "
                f"{type(value).__name__} {value!r}"
            )
        key = value.strip().lower()
        for vendor in cls:
            if key in (vendor.value, vendor.name.lower()):
                return vendor
        aliases = _vendor_aliases()
        if key in aliases:
            return aliases[key]
        accepted = sorted({v.value for v in cls} | set(aliases))
        raise ValueError(
            f"unknown hardware vendor {value!r}; use one of: {', '.join(accepted)}"
        )

#: Canonical precision keys, widest first.  ``tf32`` is fp32 storage computed on matrix
#: units with a 10-bit mantissa; ``int8`` figures are TOPS, not TFLOPS.
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")

_PRECISION_ALIASES: Dict[str, str] = {
    "fp64": "fp64", "float64": "fp64", "double": "fp64", "f64": "fp64",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp8": "fp8", "float8": "fp8",
    "int8": "int8", "i8": "int8", "qint8": "int8",
}


def precision_key(dtype: Union[str, torch.dtype]) -> str:
    """Map a torch dtype or a precision name to one of :data:`PRECISIONS`.

    ``torch.bfloat16``, ``"bfloat16"``, ``"torch.bfloat16"`` and ``"bf16"`` all give
    ``"bf16"``; every ``torch.float8_*`` dtype gives ``"fp8"``.

    Raises:
        ValueError: for a dtype with no peak-throughput class (e.g. ``torch.complex64``);
            the message lists the accepted keys.
    """
    if isinstance(dtype, torch.dtype):
        name = str(dtype).split(".", 1)[1]
    elif isinstance(dtype, str):
        name = dtype.strip().lower()
        if name.startswith("torch."):
            name = name[len("torch."):]
    else:
        raise ValueError(
            f"precision_key expects a torch.dtype or a string, got {type(dtype).__name__} "
            f"{dtype!r}"
        )
    if name.startswith("float8"):
        # float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, ...: one throughput class.
        return "fp8"
    if name in _PRECISION_ALIASES:
        return _PRECISION_ALIASES[name]
    raise ValueError(
        f"no precision class for {dtype!r}; use a floating/int8 torch dtype or one of "
        f"{', '.join(PRECISIONS)}"
    )


@dataclass
class DeviceLink:
    """A direct peer-to-peer connection from one device to another of the same vendor."""

    peer_index: int
    """Index of the peer device (same vendor, same index space as ``DeviceSpec.index``)."""
    kind: str
    """Link technology: ``"nvlink"``, ``"xgmi"``, ``"pcie-p2p"``, ..."""
    bandwidth_gbps: Optional[float] = None
    """GB/s (1e9 bytes per second) per direction, when the vendor API reports it."""


@dataclass
class HardwareCapabilities:
    """What a device can do, as read from its vendor API plus the peak tables.

    Memory is in GB = 1e9 bytes.  ``peak_tflops`` maps keys of :data:`PRECISIONS` to dense
    theoretical throughput in TFLOPS (TOPS for ``int8``): units x datasheet clock x
    FLOP per clock per unit.  A precision missing from ``peak_tflops`` means either the
    device lacks it or its rate is unknown; ``details["peak_source"]`` says how the
    figures were obtained.
    """

    device_name: str
    vendor: HardwareVendor
    architecture: str
    compute_capability: Optional[str]
    memory_total_gb: float
    memory_free_gb: float
    compute_units: int
    clock_mhz: Optional[float]
    peak_tflops: Dict[str, float]
    peak_is_theoretical: bool = True
    supported_dtypes: List[str] = field(default_factory=list)
    links: List[DeviceLink] = field(default_factory=list)
    details: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.vendor = HardwareVendor.parse(self.vendor)
        unknown = [k for k in list(self.peak_tflops) + list(self.supported_dtypes)
                   if k not in PRECISIONS]
        if unknown:
            raise ValueError(
                f"{self.device_name}: precision keys {unknown} are not canonical; "
                f"use precision_key() to map them to one of {', '.join(PRECISIONS)}"
            )

    def peak_tflops_for(self, dtype: Union[str, torch.dtype]) -> Optional[float]:
        """Dense theoretical peak for ``dtype`` in TFLOPS (TOPS for int8).

        Returns None when the device cannot compute that precision or its rate is
        unknown.  Raises ValueError for a dtype with no precision class.
        """
        key = precision_key(dtype)
        if self.supported_dtypes and key not in self.supported_dtypes:
            return None
        return self.peak_tflops.get(key)


@dataclass
class DeviceSpec:
    """One discovered device and how to address it from torch."""

    vendor: HardwareVendor
    index: int
    """Index within the vendor's torch device type (``cuda:index``, ``xpu:index``,
    ``my_asic:index``); 0 for the CPU; the OpenCL enumeration order for OpenCL devices."""
    device: torch.device
    capabilities: HardwareCapabilities
    torch_usable: bool = True
    """False for devices torch cannot run on (OpenCL); ``device`` is then ``cpu``."""

    @property
    def name(self) -> str:
        """The device's marketing name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
        return self.capabilities.device_name

    @property
    def label(self) -> str:
        """How tables and messages name the device: the torch device (``"cuda:0"``), or
        ``"<vendor>:<index>"`` (``"opencl:0"``) for a device torch cannot address."""
        return str(self.device) if self.torch_usable else f"{self.vendor.value}:{self.index}"

    @property
    def is_simulated(self) -> bool:
        """True for a simulated device (``details["simulated"]``): it runs on the host CPU,
        so selection ranks it after every real device unless its vendor is asked for."""
        return bool(self.capabilities.details.get("simulated", False))

    def __str__(self) -> str:
        caps = self.capabilities
        bf16 = caps.peak_tflops.get("bf16")
        peak = f"{bf16:.1f} TFLOPS bf16" if bf16 is not None else "bf16 peak unknown"
        usable = "" if self.torch_usable else ", not usable by torch"
        usable += ", simulated on the host CPU" if self.is_simulated else ""
        return (
            f"{self.label} [{self.vendor.value}] {caps.device_name} ({caps.architecture}): "
            f"{caps.memory_free_gb:.1f}/{caps.memory_total_gb:.1f} GB free, "
            f"{caps.compute_units} units, {peak}{usable}"
        )


class VendorAdapter(abc.ABC):
    """Discovers one vendor's devices and states the vendor's facts.

    Subclasses implement :meth:`discover_devices` and set the class attributes below;
    the HAL's tables (vendor aliases, backend and selection order, process-group
    backends) are derived from them, so a vendor is described in one place.  A missing
    library, driver or device is not an error: discovery returns ``[]`` and records why
    in ``self._unavailable_reason`` so callers can tell the user.
    """

    vendor: HardwareVendor
    #: torch device type of the vendor's devices (``"cuda"``); None if torch has none (OpenCL).
    device_type: Optional[str] = None
    #: Its name in ``backends.BackendPreference`` (``"rocm"``); "" means the vendor's value.
    backend: str = ""
    #: ``torch.distributed`` backend for collectives on ``device_type`` (``"nccl"``).
    process_group_backend: Optional[str] = None
    #: Other names :meth:`HardwareVendor.parse` accepts for the vendor (lower case).
    aliases: Tuple[str, ...] = ()
    #: Discovery and selection order: higher first; the host CPU comes last.
    priority: int = 0
    #: ``torch.version`` attribute a torch build needs for these devices (``"cuda"``, ``"hip"``).
    torch_build: Optional[str] = None

    @classmethod
    def torch_support_missing(cls) -> Optional[str]:
        """Why this torch cannot run on the vendor's devices now (a build without
        ``torch_build``, ``torch.<device_type>.is_available()`` False), or None if it can."""
        if cls.device_type is None:
            return f"torch has no {cls.vendor.value} backend; its devices cannot hold torch tensors"
        if cls.torch_build and getattr(torch.version, cls.torch_build, None) is None:
            return f"this torch build ({torch.__version__}) has no {cls.torch_build.upper()} support"
        module = getattr(torch, cls.device_type, None)
        if cls.device_type == "cpu" or (module is not None and module.is_available()):
            return None
        return f"torch.{cls.device_type}.is_available() is False"

    def __init__(self) -> None:
        self._unavailable_reason: Optional[str] = None

    @abc.abstractmethod
    def discover_devices(self) -> List[DeviceSpec]:
        """Return this vendor's devices; ``[]`` (with :attr:`unavailable_reason`) if none."""

    @property
    def unavailable_reason(self) -> Optional[str]:
        """Why the last discovery found nothing; None when devices were found or before
        the first discovery."""
        return self._unavailable_reason

    def refresh_memory(self, spec: DeviceSpec) -> None:
        """Re-read live free memory (GB) into ``spec.capabilities.memory_free_gb``.

        This generic version re-runs discovery and copies the matching device's figure;
        adapters whose vendor API can query one device cheaply override it.

        Raises:
            ValueError: if ``spec`` belongs to another vendor or its device disappeared.
        """
        self._check_owns(spec)
        for fresh in self.discover_devices():
            if fresh.index == spec.index:
                spec.capabilities.memory_free_gb = fresh.capabilities.memory_free_gb
                return
        raise ValueError(
            f"{self.vendor.value} device {spec.index} ({spec.name}) is no longer present; "
            f"call HardwareAbstractionLayer.discover(refresh=True) to re-enumerate"
        )

    def _check_owns(self, spec: DeviceSpec) -> None:
        if spec.vendor is not self.vendor:
            raise ValueError(
                f"{type(self).__name__} refreshes {self.vendor.value} devices, not "
                f"{spec.vendor.value} device {spec.name!r}; pass the spec to its own adapter"
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
