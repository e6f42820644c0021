"""Choosing one device for a job from what the HAL discovered.

Rules, applied in this order (``select_device`` and ``explain_selection`` share them):

1. Vendor filter: with ``preferred_vendors`` given, devices of vendors not in
   the list are rejected. Without it every vendor is considered, in the
   adapters' priority order (``registry.vendor_priority()``: accelerators
   before the CPU), except
   that simulated devices (``DeviceSpec.is_simulated``: my_asic on its bundled
   simulator, which runs on the host CPU) rank after every real device, the
   CPU included. Naming their vendor in ``preferred_vendors`` selects them.
2. Devices torch cannot address (``torch_usable`` False: OpenCL devices, or
   GPUs under a torch build without their backend) are rejected.
3. Memory: live free memory (GB = 1e9 bytes, as last discovered/refreshed)
   must be >= ``memory_gb``.
4. Compute: the dense theoretical peak *for the requested dtype* (TFLOPS;
   TOPS for int8) must be >= ``compute_tflops``; a device that cannot compute
   the dtype, or whose rate for it is unknown, is rejected. ``dtype=None``
   drops this rule (a job that only needs memory, as the backend API asks).
5. Ranking of the survivors: earlier preferred vendor first; within a vendor,
   more free-memory headroom (free minus required) first, then higher peak,
   then discovery order (so the result is deterministic).

Nothing here queries hardware: the functions read the ``DeviceSpec`` values
they are given, which is what keeps a selection over cached discovery in the
microseconds. This is the one selection path: ``HardwareAdapter``, the
backend API (``backends.select_backend``) and ``auto_detect_best_adapter``
all choose through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple, Union

import torch

from .hal_core import DeviceSpec, HardwareVendor, precision_key
from .registry import vendor_priority

__all__ = [
    "SelectionVerdict", "select_device", "explain_selection", "parse_vendor_list",
]

VendorLike = Union[str, HardwareVendor]


@dataclass(frozen=True)
class SelectionVerdict:
    """How one device fared against a requirement.

    ``rank`` is 0 for the device :func:`select_device` returns, 1 for the
    runner-up, ...; None when the device was rejected, in which case
    ``reasons`` says why (every failed rule, not just the first).
    """

    device: DeviceSpec
    rank: Optional[int]
    reasons: Tuple[str, ...]
    free_memory_gb: float
    """Free memory at the last discovery/refresh, GB (1e9 bytes)."""
    memory_headroom_gb: float
    """Free memory minus the requirement, GB; negative when it does not fit."""
    peak_tflops: Optional[float]
    """Peak for the requested dtype, TFLOPS (TOPS for int8); None if unsupported."""

    @property
    def accepted(self) -> bool:
        return self.rank is not None

    def __str__(self) -> str:
        where = f"{self.device.label} [{self.device.vendor.value}] {self.device.name}"
        if self.accepted:
            peak = f"{self.peak_tflops:.1f}" if self.peak_tflops is not None else "?"
            return f"#{self.rank} {where}: {self.memory_headroom_gb:+.1f} GB headroom, {peak} TFLOPS"
        return f"rejected {where}: {'; '.join(self.reasons)}"


def parse_vendor_list(preferred_vendors: Union[None, str, Iterable[VendorLike]]) -> Optional[Tuple[HardwareVendor, ...]]:
    """Normalise a vendor preference to a tuple of :class:`HardwareVendor` (None stays None).

    Accepts vendor names or aliases (``"cuda"``, ``"rocm"``, ``"xpu"``, ...),
    ``HardwareVendor`` members, or one comma-separated string
    (``"nvidia,amd"``). Duplicates keep their first position.

    Raises:
        ValueError: an unknown vendor name, or an empty list (pass None to
            consider every vendor).
    """
    if preferred_vendors is None:
        return None
    if isinstance(preferred_vendors, str):
        preferred_vendors = [part for part in preferred_vendors.split(",") if part.strip()]
    vendors: List[HardwareVendor] = []
    for value in preferred_vendors:
        vendor = HardwareVendor.parse(value)
        if vendor not in vendors:
            vendors.append(vendor)
    if not vendors:
        raise ValueError("preferred_vendors is empty; pass None to consider every vendor")
    return tuple(vendors)


def _check_requirement(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")


def _normalise_request(memory_gb, compute_tflops, dtype, preferred_vendors) -> Tuple[Optional[str], Tuple[HardwareVendor, ...], bool]:
    """(precision key or None, vendor order, whether simulated devices rank last)."""
    _check_requirement("memory_gb", memory_gb)
    _check_requirement("compute_tflops", compute_tflops)
    if dtype is None and compute_tflops:
        raise ValueError(f"compute_tflops={compute_tflops!r} needs a dtype to compare peaks in; pass dtype='bf16', ...")
    key = None if dtype is None else precision_key(dtype)
    vendors = parse_vendor_list(preferred_vendors)
    if vendors is None:
        return key, vendor_priority(), True
    return key, vendors, False


def _rejection_reasons(
    spec: DeviceSpec, memory_gb: float, compute_tflops: float, key: Optional[str], vendor_order: Tuple[HardwareVendor, ...]
) -> List[str]:
    caps = spec.capabilities
    peak = _peak(spec, key)
    reasons = []
    if spec.vendor not in vendor_order:
        reasons.append(
            f"vendor {spec.vendor.value} is not in preferred_vendors ({', '.join(v.value for v in vendor_order)})"
        )
    if not spec.torch_usable:
        reasons.append("torch cannot use this device (no backend for it in this torch build)")
    if caps.memory_free_gb < memory_gb:
        reasons.append(
            f"free memory {caps.memory_free_gb:.2f} GB < required {memory_gb:g} GB "
            f"(short by {memory_gb - caps.memory_free_gb:.2f} GB)"
        )
    if key is not None and peak is None:
        reasons.append(f"no {key} support (or its peak rate is unknown)")
    elif key is not None and peak < compute_tflops:
        reasons.append(f"peak {key} {peak:g} TFLOPS < required {compute_tflops:g} TFLOPS")
    return reasons


def _peak(spec: DeviceSpec, key: Optional[str]) -> Optional[float]:
    return None if key is None else spec.capabilities.peak_tflops_for(key)


def _ranked_candidates(
    devices: Sequence[DeviceSpec], memory_gb: float, compute_tflops: float, key: Optional[str],
    vendor_order: Tuple[HardwareVendor, ...], simulated_last: bool = True,
) -> List[Tuple[tuple, DeviceSpec, float]]:
    """(sort key, spec, peak) of every device meeting the requirement, best first.

    Only comparisons here, no message formatting: this is the whole cost of a
    cached ``select_device`` call.
    """
    accepted = []
    for position, spec in enumerate(devices):
        if not spec.torch_usable or spec.vendor not in vendor_order:
            continue
        free_gb = spec.capabilities.memory_free_gb
        if free_gb < memory_gb:
            continue
        peak = _peak(spec, key)
        if key is not None and (peak is None or peak < compute_tflops):
            continue
        vendor_rank = vendor_order.index(spec.vendor)
        if simulated_last and spec.is_simulated:
            vendor_rank += len(vendor_order)  # behind every real device, the host CPU included
        accepted.append(((vendor_rank, memory_gb - free_gb, -(peak or 0.0), position), spec, peak))
    accepted.sort(key=lambda item: item[0])
    return accepted


def explain_selection(
    devices: Sequence[DeviceSpec],
    memory_gb: float,
    compute_tflops: float,
    dtype: Union[None, str, torch.dtype] = "bf16",
    preferred_vendors: Union[None, str, Iterable[VendorLike]] = None,
) -> List[SelectionVerdict]:
    """Judge every device against the requirement (rules in the module docstring).

    Args:
        devices: candidates, e.g. ``HardwareAbstractionLayer().devices``.
        memory_gb: free memory needed, GB (1e9 bytes).
        compute_tflops: dense peak needed for ``dtype``, TFLOPS (TOPS for int8).
        dtype: torch dtype or precision key (``"bf16"``, ``"fp32"``, ...); None for
            no compute rule (``compute_tflops`` must then be 0).
        preferred_vendors: vendors to consider, best first; None for all.

    Returns:
        One :class:`SelectionVerdict` per device: accepted devices first in
        rank order, then rejected ones in the order given.

    Raises:
        ValueError: negative requirements, unknown dtype or vendor names.
    """
    key, vendor_order, simulated_last = _normalise_request(memory_gb, compute_tflops, dtype, preferred_vendors)
    ranked = _ranked_candidates(devices, memory_gb, compute_tflops, key, vendor_order, simulated_last)
    verdicts = [
        SelectionVerdict(
            spec, rank, (), spec.capabilities.memory_free_gb, spec.capabilities.memory_free_gb - memory_gb, peak
        )
        for rank, (_, spec, peak) in enumerate(ranked)
    ]
    accepted_ids = {id(spec) for _, spec, _ in ranked}
    for spec in devices:
        if id(spec) in accepted_ids:
            continue
        free_gb = spec.capabilities.memory_free_gb
        reasons = _rejection_reasons(spec, memory_gb, compute_tflops, key, vendor_order)
        verdicts.append(
            SelectionVerdict(spec, None, tuple(reasons), free_gb, free_gb - memory_gb, _peak(spec, key))
        )
    return verdicts


def select_device(
    devices: Sequence[DeviceSpec],
    memory_gb: float,
    compute_tflops: float,
    dtype: Union[None, str, torch.dtype] = "bf16",
    preferred_vendors: Union[None, str, Iterable[VendorLike]] = None,
) -> Optional[DeviceSpec]:
    """The best device meeting the requirement, or None when none does.

    Arguments and units as :func:`explain_selection`; call that to learn why
    devices were rejected.
    """
    key, vendor_order, simulated_last = _normalise_request(memory_gb, compute_tflops, dtype, preferred_vendors)
    ranked = _ranked_candidates(devices, memory_gb, compute_tflops, key, vendor_order, simulated_last)
    return ranked[0][1] if ranked else None
