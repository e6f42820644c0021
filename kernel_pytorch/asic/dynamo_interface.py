"""torch.my_asic as Dynamo's and Inductor's DeviceInterface.

Imported when torch._dynamo is (kernel_pytorch/asic/compile_registration.py),
never at ``import kernel_pytorch``.
"""

import torch
from torch._dynamo.device_interface import DeviceInterface, caching_worker_current_devices

DEVICE = "my_asic"


class MyAsicInterface(DeviceInterface):
    """Dynamo's and Inductor's view of torch.my_asic (devices, streams, properties)."""

    device = torch.my_asic.device
    Event = torch.Event  # my_asic events are torch.Event objects (torch.my_asic.Event makes them)
    Stream = torch.my_asic.Stream

    class Worker:
        """Properties readable in Inductor's compile workers without touching the device."""

        @staticmethod
        def set_device(device: int) -> None:
            caching_worker_current_devices[DEVICE] = device

        @staticmethod
        def current_device() -> int:
            if DEVICE in caching_worker_current_devices:
                return caching_worker_current_devices[DEVICE]
            return torch.my_asic.current_device()

        @staticmethod
        def get_device_properties(device=None):
            if isinstance(device, (str, torch.device)):
                device = torch.device(device).index
            return torch.my_asic.get_device_properties(
                MyAsicInterface.Worker.current_device() if device is None else device)

    current_device = staticmethod(torch.my_asic.current_device)
    set_device = staticmethod(torch.my_asic.set_device)
    device_count = staticmethod(torch.my_asic.device_count)
    stream = staticmethod(torch.my_asic.stream)
    current_stream = staticmethod(torch.my_asic.current_stream)
    set_stream = staticmethod(torch.my_asic.set_stream)
    synchronize = staticmethod(torch.my_asic.synchronize)
    memory_allocated = staticmethod(torch.my_asic.memory_allocated)
    is_bf16_supported = staticmethod(torch.my_asic.is_bf16_supported)

    @staticmethod
    def get_device_properties(device=None):
        return MyAsicInterface.Worker.get_device_properties(device)

    @staticmethod
    def is_available() -> bool:
        return torch.my_asic.is_available()

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        torch.my_asic.set_stream(torch.my_asic.Stream(
            stream_id=stream_id, device_index=device_index, device_type=device_type))

    @staticmethod
    def exchange_device(device: int) -> int:
        previous = torch.my_asic.current_device()
        if device != previous:
            torch.my_asic.set_device(device)
        return previous

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        return MyAsicInterface.exchange_device(device) if device >= 0 else -1

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        """The current stream's id on ``device_idx`` (my_asic streams are named by id)."""
        return torch.my_asic.current_stream(device_idx).stream_id

    @staticmethod
    def get_compute_capability(device=None) -> str:
        """The runtime's name: Inductor keys its caches by it (no numeric capability)."""
        return torch.my_asic.get_device_name(device)

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False
