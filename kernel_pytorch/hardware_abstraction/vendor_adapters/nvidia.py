"""NVIDIA adapter: NVML through ``nvidia-ml-py`` (imported as ``pynvml``), else ``torch.cuda``.

NVML reads the driver's view of every GPU without creating a CUDA context, so discovery
costs no GPU memory and leaves ``fork()`` safe.  NVML ignores ``CUDA_VISIBLE_DEVICES``;
this adapter applies it (indices, ``GPU-``/``MIG-`` UUID prefixes) so that
``DeviceSpec.index`` is the index torch uses (``cuda:index``).  Indices are taken in NVML
(PCI bus) order, which is what CUDA uses with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and, for
identical GPUs, by default.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from ..hal_core import (
    BYTES_PER_GB, DeviceLink, DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter,
)
from ..peak_flops import (
    ARCHITECTURES, NVIDIA_CORES_PER_SM, datasheet_clocks, nvidia_architecture,
    theoretical_peak_tflops,
)

__all__ = ["NvidiaAdapter", "parse_cuda_visible_devices"]

# NVML ABI enum values (nvml.h).  Spelled out because pynvml defines
# NVML_P2P_CAPS_INDEX_READ as a 1-tuple by mistake.
_NVML_CLOCK_SM = 1
_NVML_P2P_CAPS_INDEX_READ = 0
_NVML_P2P_CAPS_INDEX_NVLINK = 2
_NVML_P2P_STATUS_OK = 0
_NVML_FEATURE_ENABLED = 1
_NVML_NVLINK_MAX_LINKS = 18  # per GPU up to Hopper/Blackwell; higher ids answer "invalid"

# GB/s per direction of one link, keyed by nvmlDeviceGetNvLinkVersion's nvmlNvlinkVersion_t
# (1: NVLink 1.0, 2/3: 2.0/2.2, 4/5: 3.0/3.1, 6: 4.0, 7: 5.0).  NVLink 2-4 carry 25 GB/s
# per direction, e.g. H100/H200: 18 links x 25 = 450 GB/s ("900 GB/s" bidirectional).
_NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0}

_NVIDIA_DTYPES_BY_ARCH_FALLBACK = ["fp64", "fp32", "fp16"]


def parse_cuda_visible_devices(value: Optional[str]) -> Optional[List[str]]:
    """Tokens of a ``CUDA_VISIBLE_DEVICES`` value; None when unset (every GPU visible).

    An empty value hides every GPU.  Whitespace around tokens is ignored, as CUDA does.
    """
    if value is None:
        return None
    return [token.strip() for token in value.split(",") if token.strip()]


class NvidiaAdapter(VendorAdapter):
    """Discovers NVIDIA GPUs.

    Args:
        nvml: a ``pynvml``-compatible module; None imports ``pynvml`` when an NVIDIA
            driver is present.  Tests pass a fake built from a recorded real GPU.
        cuda_visible_devices: overrides the ``CUDA_VISIBLE_DEVICES`` environment value
            (the default reads the environment at discovery time).
        use_torch_fallback: query ``torch.cuda`` when NVML is unusable.  That path
            initialises CUDA and, for free memory, creates a context on each GPU.
    """

    vendor = HardwareVendor.NVIDIA
    device_type, backend, process_group_backend, torch_build = "cuda", "cuda", "nccl", "cuda"
    aliases = ("cuda",)
    priority = 70

    _FROM_ENVIRONMENT: Any = object()

    def __init__(self, nvml: Any = None, cuda_visible_devices: Any = _FROM_ENVIRONMENT,
                 use_torch_fallback: bool = True) -> None:
        super().__init__()
        self._nvml = nvml
        self._visible_override = cuda_visible_devices
        self._use_torch_fallback = use_torch_fallback
        self._problems: List[str] = []

    # ------------------------------------------------------------------ discovery
    def discover_devices(self) -> List[DeviceSpec]:
        """Visible NVIDIA GPUs, indexed as torch indexes them; [] with a reason if none."""
        if getattr(torch.version, "hip", None):
            self._unavailable_reason = (
                "torch is a ROCm build: torch.cuda addresses AMD GPUs (AmdAdapter reports them)"
            )
            return []
        self._problems = []
        nvml, nvml_problem = self._load_nvml()
        if nvml is not None:
            try:
                nvml.nvmlInit()
            except nvml.NVMLError as error:
                nvml_problem = f"pynvml: {error}"
            else:
                try:
                    specs = self._discover_with_nvml(nvml)
                finally:
                    nvml.nvmlShutdown()
                self._unavailable_reason = None if specs else (
                    "NVML found no GPU visible under CUDA_VISIBLE_DEVICES="
                    f"{self._visible_value()!r}"
                )
                return specs
        if self._use_torch_fallback and torch.backends.cuda.is_built() and torch.cuda.is_available():
            specs = self._discover_with_torch(nvml_problem)
            self._unavailable_reason = None
            return specs
        self._unavailable_reason = nvml_problem
        return []

    @property
    def problems(self) -> List[str]:
        """What the last discovery could not read about whole GPUs (e.g. a GPU NVML could
        not open); per-GPU unreadable figures are in ``details["unreadable"]``."""
        return list(self._problems)

    def refresh_memory(self, spec: DeviceSpec) -> None:
        """Re-read free memory (GB) through NVML by UUID, else ``torch.cuda.mem_get_info``."""
        self._check_owns(spec)
        uuid = spec.capabilities.details.get("uuid")
        nvml, _ = self._load_nvml()
        if nvml is not None and uuid:
            nvml.nvmlInit()
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                free = nvml.nvmlDeviceGetMemoryInfo(handle).free
            except nvml.NVMLError as error:
                # Keep the last figure; say why it is stale rather than fail the refresh.
                spec.capabilities.details.setdefault("unreadable", {})["memory info (refresh)"] = str(error)
                return
            finally:
                nvml.nvmlShutdown()
        else:
            free, _ = torch.cuda.mem_get_info(spec.index)
        spec.capabilities.memory_free_gb = free / BYTES_PER_GB

    def _visible_value(self) -> Optional[str]:
        if self._visible_override is NvidiaAdapter._FROM_ENVIRONMENT:
            return os.environ.get("CUDA_VISIBLE_DEVICES")
        return self._visible_override

    def _load_nvml(self) -> Tuple[Any, Optional[str]]:
        """(pynvml module or None, why not)."""
        if self._nvml is not None:
            return self._nvml, None
        # Probe for the driver before importing pynvml so that machines without an NVIDIA
        # GPU never load it.  /proc/driver/nvidia exists wherever the kernel module is
        # loaded; WSL and some containers only expose the user-space library, which a
        # dlopen finds (cheaply: it is what pynvml would load anyway).
        if not (os.path.exists("/proc/driver/nvidia/version") or _nvml_library_loadable()):
            return None, "no NVIDIA driver (no /proc/driver/nvidia, no libnvidia-ml)"
        try:
            import pynvml
        except ImportError as error:
            return None, f"nvidia-ml-py is not installed ({error}); pip install nvidia-ml-py"
        return pynvml, None

    def _discover_with_nvml(self, nvml: Any) -> List[DeviceSpec]:
        gpus, nvml_indices = [], []
        for i in range(nvml.nvmlDeviceGetCount()):
            try:
                gpus.append(nvml.nvmlDeviceGetHandleByIndex(i))
                nvml_indices.append(i)
            except nvml.NVMLError as error:
                # A GPU NVML cannot open (fallen off the bus, lost) is one CUDA does not
                # enumerate either; the others are still described.
                self._problems.append(f"NVML GPU {i} skipped: nvmlDeviceGetHandleByIndex: {error}")
        visible = [(handle, nvml_indices[position]) for handle, position in
                   _resolve_visible_devices(nvml, gpus, parse_cuda_visible_devices(self._visible_value()))]
        driver = _query(nvml, {}, "driver version", nvml.nvmlSystemGetDriverVersion)
        specs = []
        for torch_index, (handle, nvml_index) in enumerate(visible):
            specs.append(self._spec_from_nvml(nvml, handle, nvml_index, torch_index,
                                              None if driver is None else _text(driver)))
        _add_links(nvml, [handle for handle, _ in visible], specs)
        return specs

    def _spec_from_nvml(self, nvml: Any, handle: Any, nvml_index: int, torch_index: int,
                        driver: Optional[str]) -> DeviceSpec:
        # Every query goes through _query: one that fails (NOT_SUPPORTED on a new or
        # virtualised GPU, a transient error) leaves its figure unknown and is recorded in
        # details["unreadable"], and the GPU and the machine's other GPUs are still described.
        unreadable: Dict[str, str] = {}

        def query(what: str, call: Any, *args: Any, default: Any = None) -> Any:
            return _query(nvml, unreadable, what, call, *args, default=default)

        is_mig = _is_mig(nvml, handle)
        parent = handle
        if is_mig:
            parent = query("parent of MIG device", nvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
                           handle, default=handle)
        name = _text(query("name", nvml.nvmlDeviceGetName, handle, default="NVIDIA GPU (name unreadable)"))
        parent_name = _text(query("name", nvml.nvmlDeviceGetName, parent, default=name)) if is_mig else name
        cc = query("compute capability", nvml.nvmlDeviceGetCudaComputeCapability, parent)
        compute_capability = f"{cc[0]}.{cc[1]}" if cc else None
        arch = nvidia_architecture(compute_capability, parent_name) if compute_capability else None
        memory = query("memory info", nvml.nvmlDeviceGetMemoryInfo, handle)
        uuid = query("UUID", nvml.nvmlDeviceGetUUID, handle)
        pci = query("PCI info", nvml.nvmlDeviceGetPciInfo, parent)
        details: Dict[str, Any] = {
            "source": "nvml",
            "nvml_index": nvml_index,
            "uuid": None if uuid is None else _text(uuid),
            "pci_bus_id": None if pci is None else _text(pci.busId),
            "driver_version": driver,
            "mig": is_mig,
        }
        sm_count = _sm_count(nvml, handle, arch, is_mig, unreadable)
        row = datasheet_clocks(HardwareVendor.NVIDIA, parent_name, sm_count)
        boost_mhz: Optional[float] = None
        if row is not None:
            clock_mhz: Optional[float] = float(row.clock_mhz)
            boost_mhz = None if row.boost_clock_mhz is None else float(row.boost_clock_mhz)
            details["clock_source"] = f"datasheet clock table (peak_flops.PRODUCT_CLOCKS: {row.product})"
        else:
            max_mhz = query("max SM clock", nvml.nvmlDeviceGetMaxClockInfo, parent, _NVML_CLOCK_SM)
            clock_mhz, boost_mhz = _clocks_from_max(arch, max_mhz, details)
        if unreadable:
            details["unreadable"] = unreadable
        peak = _peak(arch, sm_count, clock_mhz, details, boost_mhz)
        caps = HardwareCapabilities(
            device_name=name,
            vendor=HardwareVendor.NVIDIA,
            architecture=arch or (f"sm_{cc[0]}{cc[1]}" if cc else "unknown"),
            compute_capability=compute_capability,
            memory_total_gb=0.0 if memory is None else memory.total / BYTES_PER_GB,
            memory_free_gb=0.0 if memory is None else memory.free / BYTES_PER_GB,
            compute_units=sm_count or 0,
            clock_mhz=clock_mhz,
            peak_tflops=peak,
            supported_dtypes=_supported_dtypes(arch),
            details=details,
        )
        return _spec(torch_index, caps)

    def _discover_with_torch(self, nvml_problem: Optional[str]) -> List[DeviceSpec]:
        specs = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            compute_capability = f"{props.major}.{props.minor}"
            arch = nvidia_architecture(compute_capability, props.name)
            free, total = torch.cuda.mem_get_info(index)
            details: Dict[str, Any] = {
                "source": "torch.cuda",
                "nvml_unavailable": nvml_problem,
                "uuid": None,
                "driver_version": None,
            }
            row = datasheet_clocks(HardwareVendor.NVIDIA, props.name, props.multi_processor_count)
            clock_mhz = None if row is None else float(row.clock_mhz)
            boost_mhz = None if row is None or row.boost_clock_mhz is None else float(row.boost_clock_mhz)
            details["clock_source"] = (
                f"datasheet clock table (peak_flops.PRODUCT_CLOCKS: {row.product})" if row is not None
                else "unknown: product not in the datasheet table and NVML unavailable"
            )
            peak = _peak(arch, props.multi_processor_count, clock_mhz, details, boost_mhz)
            caps = HardwareCapabilities(
                device_name=props.name,
                vendor=HardwareVendor.NVIDIA,
                architecture=arch or f"sm_{props.major}{props.minor}",
                compute_capability=compute_capability,
                memory_total_gb=total / BYTES_PER_GB,
                memory_free_gb=free / BYTES_PER_GB,
                compute_units=props.multi_processor_count,
                clock_mhz=clock_mhz,
                peak_tflops=peak,
                supported_dtypes=_supported_dtypes(arch),
                details=details,
            )
            specs.append(_spec(index, caps))
        return specs


def _nvml_library_loadable() -> bool:
    name = "nvml.dll" if sys.platform == "win32" else "libnvidia-ml.so.1"
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def _spec(torch_index: int, caps: HardwareCapabilities) -> DeviceSpec:
    usable = torch.backends.cuda.is_built()
    if not usable:
        caps.details["torch_note"] = "this torch build has no CUDA support"
    return DeviceSpec(HardwareVendor.NVIDIA, torch_index, torch.device("cuda", torch_index),
                      caps, torch_usable=usable)


def _peak(arch: Optional[str], sm_count: Optional[int], clock_mhz: Optional[float],
          details: Dict[str, Any], boost_clock_mhz: Optional[float] = None) -> Dict[str, float]:
    if arch is None:
        details["peak_source"] = "unavailable: compute capability not in peak_flops tables"
        return {}
    if not sm_count or not clock_mhz:
        details["peak_source"] = "unavailable: SM count or clock unknown"
        return {}
    boosted = ARCHITECTURES[(HardwareVendor.NVIDIA, arch)].boost_clock_precisions
    clocks = f"{clock_mhz:.0f} MHz"
    if boost_clock_mhz is not None and boosted:
        clocks += f" ({'/'.join(sorted(boosted))} at {boost_clock_mhz:.0f} MHz)"
    details["peak_source"] = f"{sm_count} SM x {clocks} x {arch} FLOP/clk/SM"
    return theoretical_peak_tflops(HardwareVendor.NVIDIA, arch, sm_count, clock_mhz, boost_clock_mhz)


def _clocks_from_max(arch: Optional[str], max_mhz: Any,
                     details: Dict[str, Any]) -> Tuple[Optional[float], Optional[float]]:
    """(tensor clock, boost clock) in MHz for a product missing from the clock table.

    NVML's maximum SM clock is the boost clock, which NVIDIA uses for the CUDA-core
    figures; the tensor figures are quoted at a lower clock, estimated with the
    architecture's datasheet ratio so that the peak is not overstated.
    """
    if max_mhz is None:
        details["clock_source"] = "unknown: product not in the datasheet table and NVML gave no max SM clock"
        return None, None
    boost = float(max_mhz)
    ratio = ARCHITECTURES[(HardwareVendor.NVIDIA, arch)].tensor_to_boost_clock if arch else 1.0
    if ratio == 1.0:
        details["clock_source"] = "NVML max SM clock (boost; product not in the datasheet table)"
        return boost, None
    details["clock_source"] = (
        f"estimated: product not in the datasheet table; NVML max SM clock {boost:.0f} MHz for "
        f"fp32/fp64, x {ratio:.3f} (the {arch} datasheets' tensor/boost clock ratio) = "
        f"{boost * ratio:.0f} MHz for tensor precisions"
    )
    return boost * ratio, boost


def _query(nvml: Any, unreadable: Dict[str, str], what: str, call: Any, *args: Any,
           default: Any = None) -> Any:
    """``call(*args)``, or ``default`` with ``unreadable[what]`` set when NVML raises."""
    try:
        return call(*args)
    except nvml.NVMLError as error:
        unreadable[what] = f"{getattr(call, '__name__', what)}: {error}"
        return default


def _supported_dtypes(arch: Optional[str]) -> List[str]:
    if arch is None:
        return list(_NVIDIA_DTYPES_BY_ARCH_FALLBACK)
    return list(ARCHITECTURES[(HardwareVendor.NVIDIA, arch)].flop_per_clock_per_unit)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _is_mig(nvml: Any, handle: Any) -> bool:
    try:
        return bool(nvml.nvmlDeviceIsMigDeviceHandle(handle))
    except nvml.NVMLError:
        return False


def _sm_count(nvml: Any, handle: Any, arch: Optional[str], is_mig: bool,
              unreadable: Dict[str, str]) -> Optional[int]:
    # A MIG instance owns a slice of the SMs: only nvmlDeviceGetAttributes knows how many.
    # A full GPU has no SM-count call; its core count divided by cores per SM gives it.
    if not is_mig and arch in NVIDIA_CORES_PER_SM:
        try:
            return nvml.nvmlDeviceGetNumGpuCores(handle) // NVIDIA_CORES_PER_SM[arch]
        except nvml.NVMLError:
            pass
    try:
        return int(nvml.nvmlDeviceGetAttributes(handle).multiprocessorCount)
    except nvml.NVMLError as error:
        unreadable["SM count"] = f"nvmlDeviceGetNumGpuCores/nvmlDeviceGetAttributes: {error}"
        return None


def _mig_devices(nvml: Any, gpu: Any) -> List[Any]:
    try:
        slots = nvml.nvmlDeviceGetMaxMigDeviceCount(gpu)
    except nvml.NVMLError:
        return []
    found = []
    for slot in range(slots):
        try:
            found.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, slot))
        except nvml.NVMLError:  # empty slot
            continue
    return found


def _resolve_visible_devices(nvml: Any, gpus: Sequence[Any],
                             tokens: Optional[List[str]]) -> List[Tuple[Any, int]]:
    """(handle, NVML index of the physical GPU) in torch order, per CUDA's rules: an
    invalid, ambiguous or repeated token ends the list."""
    if tokens is None:
        return [(handle, index) for index, handle in enumerate(gpus)]
    uuids = [_text(_query(nvml, {}, "UUID", nvml.nvmlDeviceGetUUID, handle, default="")) for handle in gpus]
    visible: List[Tuple[Any, int]] = []
    seen = set()
    for token in tokens:
        match = _match_token(nvml, gpus, uuids, token)
        if match is None or match[2] in seen:
            break
        seen.add(match[2])
        visible.append((match[0], match[1]))
    return visible


def _match_token(nvml: Any, gpus: Sequence[Any], uuids: List[str],
                 token: str) -> Optional[Tuple[Any, int, str]]:
    """(handle, NVML index, identity) for one CUDA_VISIBLE_DEVICES token, or None."""
    if token.isdigit():
        index = int(token)
        return (gpus[index], index, uuids[index]) if index < len(gpus) else None
    if token.startswith("GPU-"):
        hits = [i for i, uuid in enumerate(uuids) if uuid.startswith(token)]
        return (gpus[hits[0]], hits[0], uuids[hits[0]]) if len(hits) == 1 else None
    if token.startswith("MIG-"):
        hits = []
        for index, gpu in enumerate(gpus):
            for mig in _mig_devices(nvml, gpu):
                uuid = _text(_query(nvml, {}, "UUID", nvml.nvmlDeviceGetUUID, mig, default=""))
                if uuid.startswith(token):
                    hits.append((mig, index, uuid))
        return hits[0] if len(hits) == 1 else None
    return None


def _nvlink_peers(nvml: Any, handle: Any, bus_ids: Dict[str, int]) -> Tuple[Dict[int, int], int, float]:
    """(direct links per peer position, links to an NVSwitch, GB/s per link per direction)."""
    direct: Dict[int, int] = {}
    switch_links = 0
    per_link = 0.0
    for link in range(_NVML_NVLINK_MAX_LINKS):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) != _NVML_FEATURE_ENABLED:
                continue
            remote = _text(nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId)
            version = nvml.nvmlDeviceGetNvLinkVersion(handle, link)
        except nvml.NVMLError:  # link id beyond this GPU's links, or not supported
            continue
        per_link = _NVLINK_GBPS_PER_LINK.get(version, 0.0)  # unknown version: no figure
        peer = bus_ids.get(remote.upper())
        if peer is None:
            switch_links += 1
        else:
            direct[peer] = direct.get(peer, 0) + 1
    return direct, switch_links, per_link


def _add_links(nvml: Any, handles: List[Any], specs: List[DeviceSpec]) -> None:
    """Fill ``capabilities.links`` with NVLink (bandwidth from active link count) or PCIe
    P2P between every pair of visible full GPUs."""
    full = [i for i, spec in enumerate(specs)
            if not spec.capabilities.details["mig"] and spec.capabilities.details["pci_bus_id"]]
    bus_ids = {specs[i].capabilities.details["pci_bus_id"].upper(): i for i in full}
    nvlink = {i: _nvlink_peers(nvml, handles[i], bus_ids) for i in full}
    for i in full:
        for j in full:
            if i == j:
                continue
            kind = None
            bandwidth = None
            if _p2p_ok(nvml, handles[i], handles[j], _NVML_P2P_CAPS_INDEX_NVLINK):
                kind = "nvlink"
                direct, switch_links, per_link = nvlink[i]
                # Through an NVSwitch every switch link carries traffic to any peer.
                links = direct.get(j, 0) + (switch_links if nvlink[j][1] else 0)
                bandwidth = links * per_link if links and per_link else None
            elif _p2p_ok(nvml, handles[i], handles[j], _NVML_P2P_CAPS_INDEX_READ):
                kind = "pcie-p2p"
            if kind:
                specs[i].capabilities.links.append(DeviceLink(specs[j].index, kind, bandwidth))


def _p2p_ok(nvml: Any, first: Any, second: Any, capability: int) -> bool:
    try:
        return nvml.nvmlDeviceGetP2PStatus(first, second, capability) == _NVML_P2P_STATUS_OK
    except nvml.NVMLError:
        return False
