"""``torch.my_asic``: the Python face of the my_asic device.

The names follow ``torch.cuda`` so code written for CUDA ports by changing the
device string. Importing :mod:`kernel_pytorch` registers this module as
``torch.my_asic``; the device runtime itself is loaded lazily on first use.
"""

from typing import List

import torch

import kernel_pytorch as _package

if getattr(_package, "_EXTENSION_PROBLEM", None) is not None:
    # Every module of the device needs the compiled extension: say why it is missing and
    # how to build it, rather than "cannot import name '_C'".
    raise ImportError(f"kernel_pytorch.asic (the my_asic device) needs the compiled extension. {_package._EXTENSION_PROBLEM}")

from kernel_pytorch.asic._lazy import _is_in_bad_fork, _lazy_call, _lazy_init, is_initialized
from kernel_pytorch.asic.device import (
    current_device,
    device,
    device_count,
    device_of,
    get_device_name,
    get_device_properties,
    is_available,
    is_simulated,
    set_device,
    synchronize,
)
from kernel_pytorch.asic.errors import DeviceError, get_error_handler, set_error_handler
from kernel_pytorch.asic.fallback import (
    FallbackReport,
    fallback_report,
    track_fallbacks,
    fallback_stats,
    get_fallback_mode,
    native_kernels,
    reset_fallback_stats,
    set_fallback_mode,
)
from kernel_pytorch.asic.memory import (
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
)
from kernel_pytorch.asic.random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from kernel_pytorch.asic.registration import select_runtime
from kernel_pytorch.asic.streams import (
    Event,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
)


# Inductor's codegen for my_asic, looked up by torch._inductor (for PrivateUse1
# devices: torch.<device>.Scheduling, ...) when it first lowers a graph; resolved
# lazily so importing this module never imports torch._inductor.
_INDUCTOR_CODEGEN = {
    "Scheduling": "MyAsicScheduling",
    "PythonWrapperCodegen": "MyAsicWrapperCodegen",
    "CppWrapperCodegen": "MyAsicCppWrapperCodegen",
    "WrapperFxCodegen": "WrapperFxCodegen",
}


def __getattr__(name):
    if name in _INDUCTOR_CODEGEN:
        from kernel_pytorch.asic import inductor

        return getattr(inductor, _INDUCTOR_CODEGEN[name])
    raise AttributeError(f"module 'torch.my_asic' has no attribute '{name}'")


def init() -> None:
    """Initialises the device runtime now instead of on first use."""
    _lazy_init()


def get_amp_supported_dtype() -> List[torch.dtype]:
    """dtypes torch.autocast('my_asic', dtype=...) accepts."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 tensors are supported on every my_asic device."""
    return True


__all__ = [
    "DeviceError", "Event", "FallbackReport", "Stream", "StreamContext", "current_device", "current_stream", "default_stream",
    "device", "device_count", "device_of", "empty_cache", "fallback_report", "fallback_stats", "get_amp_supported_dtype",
    "get_device_name", "get_device_properties", "get_error_handler", "get_fallback_mode", "get_per_process_memory_fraction",
    "get_rng_state", "get_rng_state_all", "init", "initial_seed", "is_available", "is_bf16_supported",
    "is_initialized", "is_simulated", "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_stats", "native_kernels",
    "reset_accumulated_memory_stats",
    "reset_fallback_stats", "reset_peak_memory_stats", "seed", "seed_all", "select_runtime", "set_device", "set_error_handler", "set_fallback_mode",
    "track_fallbacks",
    "set_per_process_memory_fraction", "set_rng_state", "set_rng_state_all", "set_stream", "stream",
    "synchronize",
]
