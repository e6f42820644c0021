"""Core types of the Hardware Abstraction Layer (HAL).

A :class:`VendorAdapter` turns one vendor's discovery API into :class:`DeviceSpec`
records that carry :class:`HardwareCapabilities`; :class:`HardwareAbstractionLayer`
runs every adapter and caches the result.  Nothing here imports a vendor runtime:
adapters do that lazily inside ``discover_devices`` so that importing the HAL on a
machine without (say) an NVIDIA driver costs nothing and creates no CUDA context.

Units used throughout: memory in GB = 1e9 bytes (decimal, as vendors' datasheets);
peak throughput in TFLOPS = 1e12 floating-point operations per second (TOPS for int8),
dense (no structured sparsity), theoretical.
"""

from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

__all__ = [
    "HardwareVendor",
    "PRECISIONS",
    "precision_key",
    "DeviceLink",
    "HardwareCapabilities",
    "DeviceSpec",
    "VendorAdapter",
    "HardwareAbstractionLayer",
    "BYTES_PER_GB",
]

#: Decimal gigabyte, the unit vendors print on datasheets (an "80 GB" H100 has 85.0e9 bytes
#: of HBM, of which the driver exposes ~79.6 GiB = 85.5 GB).
BYTES_PER_GB = 1e9


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

        Besides the enum values, torch device-type names are accepted: ``cuda`` -> NVIDIA,
        ``rocm``/``hip`` -> AMD, ``xpu`` -> INTEL, ``mps`` -> APPLE and
        ``my_asic``/``asic``/``custom``/``privateuseone`` -> CUSTOM_ASIC.

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
        if key in _VENDOR_ALIASES:
            return cls(_VENDOR_ALIASES[key])
        accepted = sorted({v.value for v in cls} | set(_VENDOR_ALIASES))
        raise ValueError(
            f"unknown hardware vendor {value!r}; use one of: {', '.join(accepted)}"
        )


# Aliases are the torch device-type / runtime names people actually type.
_VENDOR_ALIASES: Dict[str, str] = {
    "cuda": "nvidia",
    "rocm": "amd",
    "hip": "amd",
    "xpu": "intel",
    "mps": "apple",
    "my_asic": "custom_asic",
    "asic": "custom_asic",
    "custom": "custom_asic",
    "privateuseone": "custom_asic",
}

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
    """Discovers one vendor's devices.

    Subclasses set the class attribute ``vendor`` and implement :meth:`discover_devices`.
    A missing library, driver or device is not an error: discovery returns ``[]`` and
    records why in ``self._unavailable_reason`` so callers can tell the user.
    """

    vendor: HardwareVendor

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


class HardwareAbstractionLayer:
    """Runs every vendor adapter and keeps the devices they found.

    Discovery is lazy (first :meth:`discover` or :attr:`devices`) and cached; call
    :meth:`refresh` for live free-memory figures or ``discover(refresh=True)`` to
    re-enumerate hardware.
    """

    def __init__(self, adapters: Optional[Sequence[VendorAdapter]] = None) -> None:
        if adapters is None:
            from .vendor_adapters import default_adapters

            adapters = default_adapters()
        for adapter in adapters:
            if not isinstance(adapter, VendorAdapter):
                raise TypeError(
                    f"HardwareAbstractionLayer adapters must be VendorAdapter instances, "
                    f"got {type(adapter).__name__}; subclass "
                    f"kernel_pytorch.hardware_abstraction.VendorAdapter"
                )
        self._adapters: List[VendorAdapter] = list(adapters)
        # Which adapter found each device, so refresh() can ask the right one.
        self._found: Optional[List[tuple]] = None

    @property
    def adapters(self) -> List[VendorAdapter]:
        """The adapters in discovery order (a copy)."""
        return list(self._adapters)

    def discover(self, refresh: bool = False) -> List[DeviceSpec]:
        """All devices of all adapters, in adapter order.

        The first call runs discovery; later calls return the cached list unless
        ``refresh`` is True.
        """
        if self._found is None or refresh:
            found = []
            for adapter in self._adapters:
                for spec in adapter.discover_devices():
                    found.append((adapter, spec))
            self._found = found
        return [spec for _, spec in self._found]

    def refresh(self) -> List[DeviceSpec]:
        """Re-read live free memory of the known devices and return them.

        Uses each adapter's per-device :meth:`VendorAdapter.refresh_memory`; if a device
        has disappeared (driver reset, hot unplug) it falls back to full re-discovery.
        """
        if self._found is None:
            return self.discover()
        try:
            for adapter, spec in self._found:
                adapter.refresh_memory(spec)
        except ValueError:
            return self.discover(refresh=True)
        return [spec for _, spec in self._found]

    @property
    def devices(self) -> List[DeviceSpec]:
        """Same as :meth:`discover` (cached)."""
        return self.discover()

    def devices_by_vendor(self) -> Dict[HardwareVendor, List[DeviceSpec]]:
        """Discovered devices grouped by vendor; vendors with no device are absent."""
        grouped: Dict[HardwareVendor, List[DeviceSpec]] = {}
        for spec in self.discover():
            grouped.setdefault(spec.vendor, []).append(spec)
        return grouped

    def unavailable_vendors(self) -> Dict[HardwareVendor, str]:
        """``vendor -> reason`` for every adapter whose discovery found nothing."""
        self.discover()
        reasons: Dict[HardwareVendor, str] = {}
        for adapter in self._adapters:
            reason = adapter.unavailable_reason
            if reason is not None:
                reasons[adapter.vendor] = reason
        return reasons
