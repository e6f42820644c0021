"""Memory statistics and control, with torch.cuda's names. Figures in bytes."""

from typing import Any, Dict, Tuple

from kernel_pytorch import _C
from kernel_pytorch.asic._lazy import _lazy_init
from kernel_pytorch.asic.device import _device_index, _DeviceLike


def memory_stats(device: _DeviceLike = None) -> Dict[str, Any]:
    """The caching allocator's statistics, keyed like torch.cuda.memory_stats()."""
    _lazy_init()
    return dict(sorted(_C._memory_stats(_device_index(device)).items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes currently occupied by tensors on ``device``."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of memory_allocated() since start or reset_peak_memory_stats()."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes held by the caching allocator (in use or cached) on ``device``."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    """Peak of memory_reserved() since start or reset_peak_memory_stats()."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Resets the peak figures of memory_stats() to the current values."""
    _lazy_init()
    _C._reset_peak_memory_stats(_device_index(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    """Resets the cumulative counters of memory_stats()."""
    _lazy_init()
    _C._reset_accumulated_memory_stats(_device_index(device))


def empty_cache() -> None:
    """Returns cached, unused device memory to the runtime."""
    if _C._is_initialized():
        _C._empty_cache()


def mem_get_info(device: _DeviceLike = None) -> Tuple[int, int]:
    """(free, total) bytes of ``device`` as the runtime reports them."""
    _lazy_init()
    return tuple(_C._mem_get_info(_device_index(device)))


def set_per_process_memory_fraction(fraction: float, device: _DeviceLike = None) -> None:
    """Caps this process's reserved memory on ``device`` at fraction × capacity.

    Allocations beyond the cap raise torch.OutOfMemoryError.
    """
    if not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
    _lazy_init()
    _C._set_memory_fraction(float(fraction), _device_index(device))


def get_per_process_memory_fraction(device: _DeviceLike = None) -> float:
    """The cap set by set_per_process_memory_fraction() (1.0 by default)."""
    _lazy_init()
    return _C._get_memory_fraction(_device_index(device))


def _set_allocator_settings(settings: str) -> None:
    """Changes the caching allocator's settings at run time, in MY_ASIC_ALLOC_CONF's syntax.

    ``settings`` is ``"key:value,key:value"`` (as for PYTORCH_CUDA_ALLOC_CONF and
    torch.cuda.memory._set_allocator_settings). Keys: ``max_pool_size_mb`` (MiB this
    process may reserve per device; 0 = no cap), ``initial_pool_size_mb`` (MiB reserved
    at a device's next allocation), ``growth_factor`` (>= 1: a new large segment is at
    least (factor - 1) x the reserved bytes), ``max_split_size_mb`` (>= 20 MiB: cached
    blocks above it are never split) and ``garbage_collection_threshold`` (in (0, 1):
    cached segments go back to the runtime before reserved memory passes this fraction
    of the pool limit). Keys it names change; the others keep their values. Invalid
    settings raise ValueError and change nothing. docs/environment.md has the details.
    """
    if not isinstance(settings, str):
        raise TypeError(f"_set_allocator_settings expects a 'key:value,...' string, got {type(settings).__name__}")
    _C._set_allocator_settings(settings)


def _get_allocator_settings() -> str:
    """The allocator settings that differ from the defaults, as 'key:value,...'."""
    return _C._get_allocator_settings()


# The memory monitor's allocation-path watches (hardware_abstraction.MemoryMonitor):
# per device, C++ calls one dispatcher when an allocation that took new device
# memory leaves use at or above the lowest watched fraction.
_watches: Dict[int, Dict[int, Tuple[float, Any]]] = {}
_next_watch = [0]


def _arm(index: int) -> None:
    watches = _watches.get(index, {})
    if not watches:
        _C._set_usage_watch(index, 0, None)
        return
    total = mem_get_info(index)[1]
    lowest = min(fraction for fraction, _ in watches.values())

    def dispatch(used: int, total: int, index: int = index) -> None:
        for fraction, fn in list(_watches.get(index, {}).values()):
            if used >= fraction * total:
                fn(used, total)

    _C._set_usage_watch(index, int(lowest * total), dispatch)


def _add_usage_watch(device: _DeviceLike, fraction: float, fn) -> Tuple[int, int]:
    """Calls ``fn(used_bytes, total_bytes)`` after allocations that take new device memory
    while use is at or above ``fraction`` of the device; returns a token for _remove_usage_watch."""
    _lazy_init()
    index = _device_index(device)
    _next_watch[0] += 1
    token = (index, _next_watch[0])
    _watches.setdefault(index, {})[token[1]] = (fraction, fn)
    _arm(index)
    return token


def _remove_usage_watch(token: Tuple[int, int]) -> None:
    index, key = token
    _watches.get(index, {}).pop(key, None)
    _arm(index)
