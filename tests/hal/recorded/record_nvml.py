"""Record every NVML answer NvidiaAdapter asks for, on a real NVIDIA machine, as JSON.

Run on the GPU host:  python tests/hal/recorded/record_nvml.py > nvml_<product>.json
The tests replay the file through a fake ``pynvml`` (tests/hal/recorded/replay.py), so the
NVML code paths are exercised against what a real driver answered.  Errors are recorded
as {"nvml_error": code} and replayed as the same NVMLError.
"""

import datetime
import json
import sys

import pynvml

NVLINK_LINKS_PROBED = 18
P2P_CAPS = {"read": 0, "nvlink": 2}  # NVML_P2P_CAPS_INDEX_READ, NVML_P2P_CAPS_INDEX_NVLINK


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def _call(function, *args):
    try:
        result = function(*args)
    except pynvml.NVMLError as error:
        return {"nvml_error": error.value}
    # Some bindings hand back ctypes scalars (nvmlDeviceIsMigDeviceHandle: c_uint).
    return result.value if hasattr(result, "value") and not hasattr(result, "busId") else result


def _record_device(handle):
    memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
    pci = _call(pynvml.nvmlDeviceGetPciInfo, handle)
    attributes = _call(pynvml.nvmlDeviceGetAttributes, handle)
    links = []
    for link in range(NVLINK_LINKS_PROBED):
        remote = _call(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
        links.append({
            "state": _call(pynvml.nvmlDeviceGetNvLinkState, handle, link),
            "version": _call(pynvml.nvmlDeviceGetNvLinkVersion, handle, link),
            "remote_bus_id": remote if isinstance(remote, dict) else _text(remote.busId),
        })
    return {
        "name": _text(pynvml.nvmlDeviceGetName(handle)),
        "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
        "pci_bus_id": pci if isinstance(pci, dict) else _text(pci.busId),
        "memory": memory if isinstance(memory, dict) else
        {"total": memory.total, "free": memory.free, "used": memory.used},
        "cuda_compute_capability": list(pynvml.nvmlDeviceGetCudaComputeCapability(handle)),
        "num_gpu_cores": _call(pynvml.nvmlDeviceGetNumGpuCores, handle),
        "max_clock_sm_mhz": _call(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
        "is_mig_device_handle": _call(pynvml.nvmlDeviceIsMigDeviceHandle, handle),
        "max_mig_device_count": _call(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle),
        "attributes": attributes if isinstance(attributes, dict) else
        {"multiprocessorCount": attributes.multiprocessorCount},
        "nvlinks": links,
    }


def main():
    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        recording = {
            "recorded": "real NVML answers captured by tests/hal/recorded/record_nvml.py",
            "date": datetime.date.today().isoformat(),
            "driver_version": _text(pynvml.nvmlSystemGetDriverVersion()),
            "devices": [_record_device(h) for h in handles],
            "p2p_status": {
                f"{i},{j}": {cap: _call(pynvml.nvmlDeviceGetP2PStatus, handles[i], handles[j], idx)
                             for cap, idx in P2P_CAPS.items()}
                for i in range(count) for j in range(count) if i != j
            },
        }
    finally:
        pynvml.nvmlShutdown()
    try:  # what torch.cuda says about the same GPUs, for cross-checks
        import torch
        recording["torch_cuda"] = [
            {"name": p.name, "total_memory": p.total_memory,
             "multi_processor_count": p.multi_processor_count, "major": p.major, "minor": p.minor}
            for p in map(torch.cuda.get_device_properties, range(torch.cuda.device_count()))
        ]
    except Exception as error:  # recording torch is optional
        recording["torch_cuda_error"] = repr(error)
    json.dump(recording, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
