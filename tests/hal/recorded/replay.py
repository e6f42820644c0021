"""Fakes of vendor APIs we cannot run here, each replaying a recorded JSON file.

They stand in for ``pynvml``, ``amdsmi``, and ``torch.cuda`` / ``torch.xpu`` of
ROCm / XPU builds, at the boundary where the adapters take them as parameters.  They
implement only the calls the adapters make, answering exactly what the recording holds
(recorded errors are raised again), and raise on anything unrecorded so that a new
adapter call cannot silently read a made-up value.
"""

from __future__ import annotations

import enum
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Optional

RECORDINGS = Path(__file__).resolve().parent


def load(name: str) -> Dict[str, Any]:
    """A recording of this folder, parsed."""
    return json.loads((RECORDINGS / name).read_text())


# ----------------------------------------------------------------------------- NVML
class NVMLError(Exception):
    """Same shape as pynvml.NVMLError: ``value`` is the nvmlReturn_t code."""

    _MESSAGES = {2: "Invalid Argument", 3: "Not Supported", 6: "Not Found",
                 9: "Driver Not Loaded", 12: "NVML Shared Library Not Found"}

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self._MESSAGES.get(self.value, f"NVML Error with code {self.value}")


class RecordedNvml:
    """A ``pynvml`` replaying tests/hal/recorded/record_nvml.py output.

    Device handles are NVML indices.  ``init_error`` makes nvmlInit fail with that code
    (12 = library not found, what pynvml raised on this driver-less CI machine).
    """

    NVMLError = NVMLError

    def __init__(self, recording: Dict[str, Any], init_error: Optional[int] = None) -> None:
        self.recording = recording
        self.devices: List[Dict[str, Any]] = recording["devices"]
        self.init_error = init_error
        self.initialised = 0

    @classmethod
    def without_driver(cls) -> "RecordedNvml":
        return cls({"devices": [], "driver_version": None}, init_error=12)

    @staticmethod
    def _answer(value: Any) -> Any:
        if isinstance(value, dict) and "nvml_error" in value:
            raise NVMLError(value["nvml_error"])
        return value

    def _device(self, handle: int) -> Dict[str, Any]:
        if not isinstance(handle, int) or not 0 <= handle < len(self.devices):
            raise NVMLError(2)
        return self.devices[handle]

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.recording["driver_version"]

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._device(index)
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:
        for index, device in enumerate(self.devices):
            if device["uuid"] == uuid:
                return index
        raise NVMLError(6)

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._device(handle)["name"]

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._device(handle)["uuid"]

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._answer(self._device(handle)["pci_bus_id"]))

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(**self._answer(self._device(handle)["memory"]))

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple:
        return tuple(self._device(handle)["cuda_compute_capability"])

    def nvmlDeviceGetNumGpuCores(self, handle: int) -> int:
        return self._answer(self._device(handle)["num_gpu_cores"])

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock_type: int) -> int:
        if clock_type != 1:  # only NVML_CLOCK_SM was recorded
            raise AssertionError(f"clock type {clock_type} was not recorded")
        return self._answer(self._device(handle)["max_clock_sm_mhz"])

    def nvmlDeviceIsMigDeviceHandle(self, handle: int) -> int:
        return self._answer(self._device(handle)["is_mig_device_handle"])

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: int) -> int:
        return self._answer(self._device(handle)["max_mig_device_count"])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: int, index: int) -> Any:
        raise NVMLError(6)  # no MIG instance in the recording

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: int) -> Any:
        raise NVMLError(2)

    def nvmlDeviceGetAttributes(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(**self._answer(self._device(handle)["attributes"]))

    def _link(self, handle: int, link: int) -> Dict[str, Any]:
        links = self._device(handle)["nvlinks"]
        if not 0 <= link < len(links):
            raise NVMLError(2)
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        return self._answer(self._link(handle, link)["state"])

    def nvmlDeviceGetNvLinkVersion(self, handle: int, link: int) -> int:
        return self._answer(self._link(handle, link)["version"])

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._answer(self._link(handle, link)["remote_bus_id"]))

    def nvmlDeviceGetP2PStatus(self, first: int, second: int, capability: int) -> int:
        name = {0: "read", 2: "nvlink"}[capability]
        return self._answer(self.recording["p2p_status"][f"{first},{second}"][name])


# ----------------------------------------------------------------- torch.cuda / torch.xpu
class RecordedTorchDeviceModule:
    """``torch.cuda`` of a ROCm build or ``torch.xpu``, replaying recorded properties."""

    def __init__(self, properties: List[Dict[str, Any]]) -> None:
        self.properties = properties

    def is_available(self) -> bool:
        return bool(self.properties)

    def device_count(self) -> int:
        return len(self.properties)

    def get_device_properties(self, index: int) -> SimpleNamespace:
        return SimpleNamespace(**{k: v for k, v in self.properties[index].items()
                                  if k != "mem_get_info"})

    def mem_get_info(self, index: int) -> tuple:
        return tuple(self.properties[index]["mem_get_info"])


# ---------------------------------------------------------------------------- amdsmi
class AmdSmiException(Exception):
    """Stands for amdsmi.AmdSmiLibraryException."""


class RecordedAmdSmi:
    """An ``amdsmi`` module replaying the "amdsmi" part of a ROCm recording.

    Processor handles are positions in the recorded processor list (amdsmi order).
    """

    AmdSmiException = AmdSmiException

    class AmdSmiClkType(enum.IntEnum):
        SYS = 0
        GFX = 0x0  # amdsmi aliases GFX to SYS
        MEM = 4

    class AmdSmiIoLinkType(enum.IntEnum):
        UNDEFINED = 0
        PCIEXPRESS = 2
        XGMI = 3

    def __init__(self, recording: Dict[str, Any]) -> None:
        self.processors = recording["processors"]
        self.links = recording["links"]
        self.initialised = False

    def amdsmi_init(self) -> None:
        self.initialised = True

    def amdsmi_shut_down(self) -> None:
        self.initialised = False

    def _check(self) -> None:
        if not self.initialised:
            raise AmdSmiException("AMDSMI_STATUS_NOT_INIT")

    def amdsmi_get_processor_handles(self) -> List[int]:
        self._check()
        return list(range(len(self.processors)))

    def amdsmi_get_gpu_enumeration_info(self, handle: int) -> Dict[str, Any]:
        self._check()
        return {"hip_id": self.processors[handle]["hip_id"]}

    def amdsmi_get_gpu_asic_info(self, handle: int) -> Dict[str, Any]:
        self._check()
        p = self.processors[handle]
        return {"market_name": p["market_name"], "target_graphics_version": p["target_graphics_version"]}

    def amdsmi_get_gpu_vram_usage(self, handle: int) -> Dict[str, int]:
        self._check()
        return dict(self.processors[handle]["vram_usage"])

    def amdsmi_get_clock_info(self, handle: int, clock_type: int) -> Dict[str, int]:
        self._check()
        if clock_type != self.AmdSmiClkType.GFX:
            raise AssertionError(f"clock type {clock_type} was not recorded")
        return dict(self.processors[handle]["clock_gfx"])

    def _hip(self, handle: int) -> int:
        return self.processors[handle]["hip_id"]

    def amdsmi_topo_get_link_type(self, source: int, target: int) -> Dict[str, int]:
        self._check()
        link = self.links[f"{self._hip(source)},{self._hip(target)}"]
        return {"hops": link["hops"], "type": self.AmdSmiIoLinkType[link["type"]]}

    def amdsmi_get_minmax_bandwidth_between_processors(self, source: int, target: int) -> Dict[str, int]:
        self._check()
        link = self.links[f"{self._hip(source)},{self._hip(target)}"]
        return {"min_bandwidth": 0, "max_bandwidth": link["max_bandwidth"]}
