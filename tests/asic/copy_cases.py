"""Copies to, from and between my_asic devices, each checked against the CPU.

Each case is ``name -> fn() -> (result, expected)``: it moves data along one
path (host to device, device to host, device to device, across devices, with a
dtype change, from or into non-contiguous memory, non_blocking) and returns the
result brought back to the CPU together with what plain CPU code gives.

Shared by test_copies.py: in process (host-addressable memory) and in a
subprocess with MY_ASIC_HOST_ADDRESSABLE=0, where copies go through the
runtime's memcpy only.
"""

import json

import torch


def _source():
    return torch.arange(24, dtype=torch.float32).reshape(4, 6)


def _host_to_device():
    return _source().to("my_asic").cpu(), _source()


def _host_to_device_with_dtype_change():
    return _source().to("my_asic", torch.int32).cpu(), _source().to(torch.int32)


def _device_to_device_with_dtype_change():
    return _source().to("my_asic").to(torch.float16).cpu(), _source().to(torch.float16)


def _device_to_second_device():
    moved = _source().to("my_asic:0").to("my_asic:1")
    assert moved.device == torch.device("my_asic", 1)
    return moved.cpu(), _source()


def _second_device_to_first_with_dtype_change():
    moved = _source().to("my_asic:1").to("my_asic:0", torch.float64)
    assert moved.device == torch.device("my_asic", 0)
    return moved.cpu(), _source().double()


def _transposed_host_to_device():
    return _source().t().to("my_asic").cpu(), _source().t()


def _transposed_device_to_host():
    return _source().to("my_asic").t().cpu(), _source().t()


def _strided_slice_device_to_second_device():
    return _source().to("my_asic:0")[:, ::2].to("my_asic:1").cpu(), _source()[:, ::2]


def _into_non_contiguous_device_column():
    target = torch.zeros(4, 6, device="my_asic")
    target[:, 1].copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    expected = torch.zeros(4, 6)
    expected[:, 1] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    return target.cpu(), expected


def _broadcast_into_device():
    target = torch.zeros(3, 4, device="my_asic")
    target.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    return target.cpu(), torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(3, 4)


def _conjugate_view_to_device():
    source = torch.tensor([1 + 2j, 3 - 4j])
    return source.conj().to("my_asic").cpu(), source.conj().resolve_conj()


def _bfloat16_round_trip():
    source = _source().bfloat16()
    return source.to("my_asic").cpu(), source


def _bool_round_trip():
    source = _source() > 10
    return source.to("my_asic").cpu(), source


def _non_blocking_from_and_to_pinned_memory():
    device = _source().pin_memory().to("my_asic", non_blocking=True)
    back = torch.empty(4, 6).pin_memory()
    back.copy_(device, non_blocking=True)
    torch.my_asic.synchronize()
    return back, _source()


def _scalar_item():
    value = _source().to("my_asic")[2, 3].item()
    return torch.tensor(value), torch.tensor(15.0)


def _empty_tensor():
    return torch.empty(0, 3).to("my_asic").cpu(), torch.empty(0, 3)


CASES = {
    "host_to_device": _host_to_device,
    "host_to_device_with_dtype_change": _host_to_device_with_dtype_change,
    "device_to_device_with_dtype_change": _device_to_device_with_dtype_change,
    "device_to_second_device": _device_to_second_device,
    "second_device_to_first_with_dtype_change": _second_device_to_first_with_dtype_change,
    "transposed_host_to_device": _transposed_host_to_device,
    "transposed_device_to_host": _transposed_device_to_host,
    "strided_slice_device_to_second_device": _strided_slice_device_to_second_device,
    "into_non_contiguous_device_column": _into_non_contiguous_device_column,
    "broadcast_into_device": _broadcast_into_device,
    "conjugate_view_to_device": _conjugate_view_to_device,
    "bfloat16_round_trip": _bfloat16_round_trip,
    "bool_round_trip": _bool_round_trip,
    "non_blocking_from_and_to_pinned_memory": _non_blocking_from_and_to_pinned_memory,
    "scalar_item": _scalar_item,
    "empty_tensor": _empty_tensor,
}


def mismatch(result, expected):
    """Why ``result`` differs from ``expected`` (both CPU), or None: dtype, shape and values must be equal."""
    if result.device.type != "cpu":
        return f"result came back on {result.device}, expected cpu"
    if result.dtype != expected.dtype or result.shape != expected.shape:
        return f"got {result.dtype}{list(result.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if not torch.equal(result, expected):
        return f"values differ: got {result.flatten()[:8].tolist()}, expected {expected.flatten()[:8].tolist()}"
    return None


def report_all_cases():
    """Runs every case and prints {name: problem or None} as JSON (subprocess use)."""
    report = {}
    for name, case in CASES.items():
        try:
            report[name] = mismatch(*case())
        except Exception as error:  # reported per case, so one failure doesn't hide the rest
            report[name] = f"{type(error).__name__}: {error}"
    print(json.dumps(report))
