"""Plugging a chip into PyTorch as the ``my_asic`` PrivateUse1 device.

A chip team provides two things:

* a **device runtime**: a shared library implementing the kpdr C ABI
  (``csrc/runtime/kpdr.h``, see docs/device_runtime_abi.md). It is what
  actually moves bytes and runs streams; kernel_pytorch loads it with dlopen.
* a **CustomDeviceBackend**: a Python description of the devices (how many,
  their names and memory), used to configure and check the runtime.

``register_custom_device(backend, config)`` ties them together before the
device is first used. The reference runtime ``libmyasic.so`` (a simulated
ASIC) ships inside the package, so a backend can also just describe the
simulated devices it wants.
"""

from __future__ import annotations

import abc
import ctypes
import dataclasses
import os
from typing import Any, Dict, List, Optional

import torch

from kernel_pytorch.asic.registration import BUNDLED_RUNTIME_DIR, BUNDLED_RUNTIMES, claim_privateuse1, register_device
from kernel_pytorch.hardware_abstraction.hal_core import HardwareVendor

__all__ = [
    "CustomDeviceBackend", "PrivateUse1Config", "register_custom_device", "registered_backend",
    "resolve_backend_library",
]

_KPDR_ABI_VERSION = 1


class CustomDeviceBackend(abc.ABC):
    """Describes the devices of a custom accelerator.

    Subclasses answer three questions about the hardware; registration uses
    the answers to configure the device runtime and to check what it reports.

    Args:
        name: the torch device name the backend is registered under (``"my_asic"``).
        vendor: the vendor, normally ``HardwareVendor.CUSTOM_ASIC``.
    """

    def __init__(self, name: str, vendor: HardwareVendor = HardwareVendor.CUSTOM_ASIC):
        self.name = name
        self.vendor = HardwareVendor.parse(vendor)

    @abc.abstractmethod
    def initialize_device(self, device_id: int) -> bool:
        """Prepares device ``device_id``; return False if it cannot be used."""

    @abc.abstractmethod
    def get_device_count(self) -> int:
        """Number of devices."""

    @abc.abstractmethod
    def get_device_properties(self, device_id: int) -> Dict[str, Any]:
        """Properties of one device.

        Keys: ``name`` (str) and ``memory`` (capacity in MiB, int); optionally
        ``compute_units`` (int).
        """

    def allocate_memory(self, size: int, device_id: int) -> torch.Tensor:
        """``size`` bytes of device memory on ``device_id`` as a uint8 tensor."""
        return torch.empty(size, dtype=torch.uint8, device=torch.device(self.name, device_id))

    def copy_to_device(self, tensor: torch.Tensor, device_id: int) -> torch.Tensor:
        """``tensor`` copied to device ``device_id``."""
        return tensor.to(torch.device(self.name, device_id))


@dataclasses.dataclass
class PrivateUse1Config:
    """How to register a custom device on PyTorch's PrivateUse1 key.

    Attributes:
        device_name: the torch device name; kernel_pytorch owns PrivateUse1 as
            ``"my_asic"``, and PyTorch allows one name per process.
        vendor: the vendor of the device.
        backend_library: the kpdr runtime library: a path, or a bare file name
            looked up in the package's bundled runtimes first (``libmyasic.so``,
            ``libkpdr_opencl.so``; the short names ``"myasic"`` and ``"opencl"``
            work too) and then by the system loader (``LD_LIBRARY_PATH``, ldconfig).
        enable_autograd: autograd on the device. PyTorch's AutogradPrivateUse1
            fallback always provides it, so this must stay True.
        enable_compilation: whether torch.compile is expected to work on the
            device. It works on every kpdr runtime: Inductor's C++ kernels where
            device memory is host addressable, the ``"my_asic"`` backend (AOT
            autograd through the dispatcher) elsewhere;
            ``registered_backend().compile_path`` says which.
        runtime_options: extra ``key=value`` options passed to the runtime's
            ``kpdrInit`` (keys a runtime doesn't know are ignored).
    """

    device_name: str = "my_asic"
    vendor: HardwareVendor = HardwareVendor.CUSTOM_ASIC
    backend_library: str = "libmyasic.so"
    enable_autograd: bool = True
    enable_compilation: bool = False
    runtime_options: Dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RegisteredBackend:
    """What register_custom_device() set up in this process."""

    backend: CustomDeviceBackend
    config: PrivateUse1Config
    library_path: str
    options: str

    @property
    def compile_path(self) -> str:
        """How torch.compile compiles graphs on this device (see compile_backend.compile_path)."""
        from kernel_pytorch.asic.compile_backend import compile_path

        return compile_path()


_registered: Optional[RegisteredBackend] = None


def registered_backend() -> Optional[RegisteredBackend]:
    """The backend registered in this process, or None."""
    return _registered


def resolve_backend_library(library: str) -> str:
    """Finds the runtime library and checks that it implements the kpdr ABI.

    A name containing a path separator is used as a path. A bare file name is
    looked up among the runtimes shipped in the package, then left to the
    system loader. Returns what to dlopen.

    Raises:
        FileNotFoundError: the library cannot be found or loaded.
        ValueError: it loads but is not a kpdr runtime of the right version.
    """
    library = BUNDLED_RUNTIMES.get(library.lower(), library) if library else library
    if not library:
        raise ValueError("backend_library is empty: give a path or a file name such as 'libmyasic.so'")
    if os.sep in library:
        path = os.path.abspath(library)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"backend_library '{library}' does not exist. Build your runtime first "
                f"(see docs/device_runtime_abi.md) or pass the bundled 'libmyasic.so'."
            )
    else:
        bundled = os.path.join(BUNDLED_RUNTIME_DIR, library)
        path = bundled if os.path.isfile(bundled) else library
    try:
        lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | os.RTLD_NOW)
    except OSError as e:
        raise FileNotFoundError(
            f"cannot load backend_library '{library}': {e}. A bare name is searched in "
            f"{BUNDLED_RUNTIME_DIR} and then by the system loader (LD_LIBRARY_PATH); "
            f"pass a full path otherwise."
        ) from e
    try:
        get_version = lib.kpdrGetAbiVersion
    except AttributeError:
        raise ValueError(
            f"'{path}' is not a kpdr device runtime: it does not export kpdrGetAbiVersion. "
            f"A runtime must implement csrc/runtime/kpdr.h (docs/device_runtime_abi.md)."
        ) from None
    get_version.restype = ctypes.c_uint32
    version = get_version()
    if version != _KPDR_ABI_VERSION:
        raise ValueError(
            f"'{path}' implements kpdr ABI version {version}, but this kernel_pytorch needs "
            f"version {_KPDR_ABI_VERSION}. Rebuild the runtime against this kpdr.h."
        )
    return path


def _describe_devices(backend: CustomDeviceBackend) -> Dict[str, str]:
    """Runtime options that make the runtime match the backend's description."""
    count = backend.get_device_count()
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"{type(backend).__name__}.get_device_count() must return an int >= 1, got {count!r}")
    props: List[Dict[str, Any]] = [backend.get_device_properties(i) for i in range(count)]
    names, memories, units = [], set(), set()
    for i, p in enumerate(props):
        if not isinstance(p, dict) or "name" not in p or "memory" not in p:
            raise ValueError(
                f"{type(backend).__name__}.get_device_properties({i}) must return a dict with "
                f"'name' (str) and 'memory' (MiB), got {p!r}"
            )
        name = str(p["name"])
        if any(c in name for c in ",;="):
            raise ValueError(f"device name {name!r} may not contain ',', ';' or '='")
        if not isinstance(p["memory"], int) or p["memory"] <= 0:
            raise ValueError(f"device {i}: 'memory' must be a positive int of MiB, got {p['memory']!r}")
        names.append(name)
        memories.add(p["memory"])
        if "compute_units" in p:
            units.add(int(p["compute_units"]))
    if len(memories) != 1:
        raise ValueError(
            f"devices report different capacities {sorted(memories)} MiB; the runtime is configured "
            f"with one capacity for all devices"
        )
    options = {"device_count": str(count), "memory_mb": str(memories.pop()), "names": ",".join(names)}
    if len(units) == 1:
        options["compute_units"] = str(units.pop())
    return options


def _check_runtime_matches(backend: CustomDeviceBackend, count: int, names: List[str]) -> None:
    from kernel_pytorch import asic

    actual = asic.device_count()
    if actual != count:
        raise RuntimeError(
            f"the device runtime reports {actual} device(s) but {type(backend).__name__} describes "
            f"{count}. Make get_device_count() agree with the runtime library."
        )
    for i, name in enumerate(names):
        got = asic.get_device_name(i)
        if got != name:
            raise RuntimeError(
                f"device {i}: the runtime calls it {got!r} but {type(backend).__name__} says {name!r}."
            )


def register_custom_device(backend: CustomDeviceBackend, config: PrivateUse1Config) -> bool:
    """Registers ``backend``'s devices as the PrivateUse1 device and initialises them.

    Must run before the device is first used in this process. Registering the
    same backend configuration twice is allowed and returns True.

    Returns:
        True once the device is registered, initialised and matches ``backend``.

    Raises:
        ValueError: inconsistent backend or config (names, capacities, autograd), or
            simulated devices holding more memory than the host has without
            ``runtime_options={"overcommit": "1"}`` (the simulator ``libmyasic.so``
            keeps device memory in host memory).
        FileNotFoundError: the runtime library cannot be found or loaded.
        RuntimeError: PrivateUse1 already has another name, the device was
            already initialised with another configuration, or the runtime
            disagrees with the backend's description.
    """
    global _registered
    import kernel_pytorch

    if kernel_pytorch._EXTENSION_PROBLEM is not None:
        raise ImportError(kernel_pytorch._EXTENSION_PROBLEM)
    from kernel_pytorch import _C, asic

    if not isinstance(backend, CustomDeviceBackend):
        raise TypeError(f"backend must be a CustomDeviceBackend, got {type(backend).__name__}")
    if not isinstance(config, PrivateUse1Config):
        raise TypeError(f"config must be a PrivateUse1Config, got {type(config).__name__}")
    if backend.name != config.device_name:
        raise ValueError(
            f"backend name {backend.name!r} and config.device_name {config.device_name!r} differ; "
            f"use one device name for both"
        )
    if HardwareVendor.parse(config.vendor) != backend.vendor:
        raise ValueError(f"config.vendor {config.vendor} differs from the backend's vendor {backend.vendor}")
    if not config.enable_autograd:
        raise ValueError(
            "enable_autograd=False is not supported: PyTorch's AutogradPrivateUse1 fallback always "
            "provides autograd for the device"
        )
    claim_privateuse1(config.device_name)

    options = _describe_devices(backend)
    options.update({str(k): str(v) for k, v in config.runtime_options.items()})
    option_string = ";".join(f"{k}={v}" for k, v in options.items())
    path = resolve_backend_library(config.backend_library)

    if _C._is_initialized() and (_C._runtime_library(), _C._runtime_options()) != (path, option_string):
        raise RuntimeError(
            f"{config.device_name} is already initialised in this process with runtime "
            f"'{_C._runtime_library()}' (options '{_C._runtime_options()}'). Call "
            f"register_custom_device() before the first use of the device (any tensor, "
            f"device_count() or HAL discovery), or start a new process."
        )
    count = int(options["device_count"])
    for i in range(count):
        if not backend.initialize_device(i):
            raise RuntimeError(f"{type(backend).__name__}.initialize_device({i}) returned False")
    _C._set_runtime(path, option_string)
    register_device(force=True)
    try:
        asic.init()
    except RuntimeError as error:
        if "overcommit=1" not in str(error):
            raise
        # The simulator keeps device memory in host memory and refuses more than the
        # host has unless overcommit is asked for; nothing was initialised, so the
        # caller can register again.
        raise ValueError(
            f"{type(backend).__name__} describes {count} device(s) of {options['memory_mb']} MiB, more "
            f"memory than this host can back for the simulator {config.backend_library!r}. Return a smaller "
            f"'memory' from get_device_properties(), or simulate it anyway with "
            f"PrivateUse1Config(runtime_options={{'overcommit': '1'}}). The runtime said: {error}"
        ) from None
    _check_runtime_matches(backend, count, options["names"].split(","))
    _registered = RegisteredBackend(backend=backend, config=config, library_path=path, options=option_string)
    return True
