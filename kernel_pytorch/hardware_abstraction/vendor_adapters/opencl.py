"""OpenCL adapter: every device behind the OpenCL ICD loader (``libOpenCL``).

The adapter calls the loader's C API through ctypes (``clGetPlatformIDs``,
``clGetDeviceIDs``, ``clGetDeviceInfo``) rather than through pyopencl: the handful of
queries it needs cost microseconds that way, while importing pyopencl costs ~0.2 s
(numpy, pytools), which alone would break the HAL's discovery budget.

OpenCL devices are reported for inventory and capacity planning: torch cannot run on
them, so ``DeviceSpec.torch_usable`` is False and ``device`` is ``cpu``.  OpenCL exposes
no FLOP-per-clock figure, so the peak is estimated as one native-width vector FMA per
compute unit per clock, a lower bound for cores with several FMA pipes (labelled in
``details["peak_source"]``).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any, Dict, List, Optional, Tuple

import torch

from ..hal_core import BYTES_PER_GB, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter
from ..peak_flops import peak_from_rates

__all__ = ["OpenCLAdapter"]

# cl.h constants (OpenCL ABI).
_CL_SUCCESS = 0
_CL_PLATFORM_NAME = 0x0902
_CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
_CL_DEVICE_TYPE = 0x1000
_CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002
_CL_DEVICE_MAX_CLOCK_FREQUENCY = 0x100C
_CL_DEVICE_GLOBAL_MEM_SIZE = 0x101F
_CL_DEVICE_NAME = 0x102B
_CL_DEVICE_VENDOR = 0x102C
_CL_DRIVER_VERSION = 0x102D
_CL_DEVICE_VERSION = 0x102F
_CL_DEVICE_EXTENSIONS = 0x1030
_CL_DEVICE_NATIVE_VECTOR_WIDTH = {"fp32": 0x103A, "fp64": 0x103B, "fp16": 0x103C}
_CL_DEVICE_TYPE_NAMES = ((4, "gpu"), (2, "cpu"), (8, "accelerator"))  # GPU, CPU, ACCELERATOR
# Precisions beyond fp32 exist only with their extension.
_REQUIRED_EXTENSION = {"fp64": "cl_khr_fp64", "fp16": "cl_khr_fp16"}
_FLOP_PER_FMA = 2

_LOADER_NAMES = {
    "darwin": ("/System/Library/Frameworks/OpenCL.framework/OpenCL",),
    "win32": ("OpenCL.dll",),
}.get(sys.platform, ("libOpenCL.so.1", "libOpenCL.so"))


class OpenCLError(RuntimeError):
    """An OpenCL call returned an error code."""

    def __init__(self, call: str, code: int) -> None:
        super().__init__(f"{call} returned OpenCL error {code}")
        self.code = code


class _IcdLoader:
    """The few OpenCL entry points discovery needs, typed for ctypes."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self._lib = library
        pointer, uint, size = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t
        library.clGetPlatformIDs.argtypes = [uint, ctypes.POINTER(pointer), ctypes.POINTER(uint)]
        library.clGetPlatformInfo.argtypes = [pointer, uint, size, pointer, ctypes.POINTER(size)]
        library.clGetDeviceIDs.argtypes = [pointer, ctypes.c_uint64, uint,
                                           ctypes.POINTER(pointer), ctypes.POINTER(uint)]
        library.clGetDeviceInfo.argtypes = [pointer, uint, size, pointer, ctypes.POINTER(size)]
        for function in ("clGetPlatformIDs", "clGetPlatformInfo", "clGetDeviceIDs", "clGetDeviceInfo"):
            getattr(library, function).restype = ctypes.c_int32

    @classmethod
    def load(cls) -> Tuple[Optional["_IcdLoader"], Optional[str]]:
        errors = []
        for name in _LOADER_NAMES:
            try:
                return cls(ctypes.CDLL(name)), None
            except OSError as error:
                errors.append(str(error))
        return None, ("no OpenCL ICD loader (" + "; ".join(errors) + "); install ocl-icd-libopencl1 "
                      "and an ICD such as pocl-opencl-icd")

    def _ids(self, call: str, function: Any, *args: Any) -> List[int]:
        count = ctypes.c_uint32(0)
        code = function(*args, 0, None, ctypes.byref(count))
        if code != _CL_SUCCESS:
            raise OpenCLError(call, code)
        ids = (ctypes.c_void_p * count.value)()
        code = function(*args, count.value, ids, None)
        if code != _CL_SUCCESS:
            raise OpenCLError(call, code)
        return list(ids)

    def platforms(self) -> List[int]:
        return self._ids("clGetPlatformIDs", self._lib.clGetPlatformIDs)

    def devices(self, platform: int) -> List[int]:
        return self._ids("clGetDeviceIDs", self._lib.clGetDeviceIDs, platform, _CL_DEVICE_TYPE_ALL)

    def _info(self, call: str, function: Any, handle: int, param: int) -> bytes:
        size = ctypes.c_size_t(0)
        code = function(handle, param, 0, None, ctypes.byref(size))
        if code != _CL_SUCCESS:
            raise OpenCLError(call, code)
        buffer = ctypes.create_string_buffer(size.value)
        code = function(handle, param, size.value, buffer, None)
        if code != _CL_SUCCESS:
            raise OpenCLError(call, code)
        return buffer.raw

    def platform_text(self, platform: int, param: int) -> str:
        return self._info("clGetPlatformInfo", self._lib.clGetPlatformInfo, platform, param) \
            .rstrip(b"\0").decode(errors="replace").strip()

    def device_text(self, device: int, param: int) -> str:
        return self._info("clGetDeviceInfo", self._lib.clGetDeviceInfo, device, param) \
            .rstrip(b"\0").decode(errors="replace").strip()

    def device_int(self, device: int, param: int) -> int:
        raw = self._info("clGetDeviceInfo", self._lib.clGetDeviceInfo, device, param)
        return int.from_bytes(raw, sys.byteorder)  # cl_uint / cl_ulong / cl_bitfield


class OpenCLAdapter(VendorAdapter):
    """Discovers OpenCL devices of every installed ICD (PoCL, vendor GPU drivers, ...),
    indexed in platform order, then device order."""

    vendor = HardwareVendor.OPENCL
    backend = "opencl"  # no device_type: torch cannot address OpenCL devices
    priority = 20

    @classmethod
    def torch_support_missing(cls) -> Optional[str]:
        """Always a reason: torch has no OpenCL backend."""
        return "torch has no OpenCL backend; OpenCL devices cannot hold torch tensors"

    def discover_devices(self) -> List[DeviceSpec]:
        """All OpenCL devices; [] with a reason when there is no loader or platform."""
        loader, problem = _IcdLoader.load()
        if loader is None:
            self._unavailable_reason = problem
            return []
        try:
            platforms = loader.platforms()
        except OpenCLError as error:  # -1001 PLATFORM_NOT_FOUND_KHR: no ICD registered
            self._unavailable_reason = (
                f"OpenCL ICD loader found no platform ({error}); install an ICD such as "
                f"pocl-opencl-icd"
            )
            return []
        specs: List[DeviceSpec] = []
        for platform in platforms:
            try:
                devices = loader.devices(platform)
            except OpenCLError:  # a platform without devices answers DEVICE_NOT_FOUND
                continue
            platform_name = loader.platform_text(platform, _CL_PLATFORM_NAME)
            for device in devices:
                specs.append(_spec(loader, platform_name, device, len(specs)))
        self._unavailable_reason = None if specs else "OpenCL platforms report no devices"
        return specs


def _spec(loader: _IcdLoader, platform_name: str, device: int, index: int) -> DeviceSpec:
    extensions = set(loader.device_text(device, _CL_DEVICE_EXTENSIONS).split())
    rates: Dict[str, float] = {}
    for key, param in _CL_DEVICE_NATIVE_VECTOR_WIDTH.items():
        width = loader.device_int(device, param)
        required = _REQUIRED_EXTENSION.get(key)
        if width and (required is None or required in extensions):
            rates[key] = float(width * _FLOP_PER_FMA)
    units = loader.device_int(device, _CL_DEVICE_MAX_COMPUTE_UNITS)
    clock_mhz = float(loader.device_int(device, _CL_DEVICE_MAX_CLOCK_FREQUENCY)) or None
    type_bits = loader.device_int(device, _CL_DEVICE_TYPE)
    device_type = next((name for bit, name in _CL_DEVICE_TYPE_NAMES if type_bits & bit), "custom")
    details: Dict[str, Any] = {
        "platform": platform_name,
        "device_vendor": loader.device_text(device, _CL_DEVICE_VENDOR),
        "device_type": device_type,
        "opencl_version": loader.device_text(device, _CL_DEVICE_VERSION),
        "driver_version": loader.device_text(device, _CL_DRIVER_VERSION),
        "flop_per_clock_per_unit": rates,
        "memory_free_source": "OpenCL has no free-memory query: reporting total",
    }
    if clock_mhz and units:
        peak = peak_from_rates(rates, units, clock_mhz)
        details["peak_source"] = (
            f"estimate: {units} units x {clock_mhz:.0f} MHz x one native vector FMA per clock "
            f"(lower bound on multi-pipe cores)"
        )
    else:
        peak = {}
        details["peak_source"] = "unavailable: device reports no clock or compute units"
    total_gb = loader.device_int(device, _CL_DEVICE_GLOBAL_MEM_SIZE) / BYTES_PER_GB
    caps = HardwareCapabilities(
        device_name=loader.device_text(device, _CL_DEVICE_NAME),
        vendor=HardwareVendor.OPENCL,
        architecture=f"opencl-{device_type}",
        compute_capability=None,
        memory_total_gb=total_gb,
        memory_free_gb=total_gb,
        compute_units=units,
        clock_mhz=clock_mhz,
        peak_tflops=peak,
        supported_dtypes=list(rates),
        details=details,
    )
    return DeviceSpec(HardwareVendor.OPENCL, index, torch.device("cpu"), caps, torch_usable=False)
