"""The ABI contract checks: what docs/device_runtime_abi.md says every kpdr runtime must do.

Each check talks to the runtime only through the C ABI (ctypes, :mod:`.kpdr_ctypes`),
on a fresh copy of the library: ``kpdrInit`` configures a process once, and every
``dlopen`` of a distinct file gets fresh state, so one check's leftovers (a failed
allocation, a destroyed handle) cannot change the next one's result. Nothing here
depends on the simulator: sizes come from ``kpdrMemGetInfo`` and the device
properties, and ordering is checked by data (a stream that let later work overtake
earlier work ends with the wrong bytes), never by timing.

Run as a worker of the kit (one JSON line per check):

    python -m kernel_pytorch.asic.conformance.abi --items all   # with MY_ASIC_RUNTIME=...
"""

import argparse
import ctypes
import math
import os
import random
import shutil
import sys
import tempfile
import threading
import uuid
from pathlib import Path

from kernel_pytorch.asic.conformance import kpdr_ctypes as k
from kernel_pytorch.asic.conformance.runner import emit, first_line

MIB = k.MIB


class Skip(Exception):
    """The check does not apply to this runtime (one device, say)."""


class Context:
    """Loads fresh copies of the runtime under test (``MY_ASIC_RUNTIME``)."""

    def __init__(self, library, options):
        self.library = Path(library)
        self.options = options
        self._directory = tempfile.mkdtemp(prefix="kp-abi-")

    def uninitialised(self):
        """A fresh copy of the library, not initialised yet."""
        copy = Path(self._directory) / f"{uuid.uuid4().hex}-{self.library.name}"
        shutil.copyfile(self.library, copy)
        return k.KpdrLibrary(copy)

    def runtime(self):
        """A fresh copy initialised with the options under test."""
        return self.uninitialised().init(self.options)

    def close(self):
        shutil.rmtree(self._directory, ignore_errors=True)


def pattern(size, seed):
    return random.Random(seed).randbytes(size)


def expect(code, wanted, what, runtime=None):
    """Asserts ``code`` is ``wanted`` (a code or a tuple of acceptable codes)."""
    wanted = wanted if isinstance(wanted, tuple) else (wanted,)
    if code not in wanted:
        detail = f" ({runtime.last_error_message()})" if runtime is not None and code != k.SUCCESS else ""
        names = " or ".join(k.error_name(w) for w in wanted)
        raise AssertionError(f"{what}: expected {names}, got {k.error_name(code)}{detail}")


def expect_message(runtime, what):
    """A failed call must leave a detail for the calling thread."""
    if not runtime.last_error_message().strip():
        raise AssertionError(f"{what}: failed without a message in kpdrGetLastErrorMessage()")


def need_devices(runtime, count):
    if runtime.device_count() < count:
        raise Skip(f"needs {count} devices, the runtime has {runtime.device_count()}")


def buffer_at(data, offset=0, total=None):
    """A ctypes host buffer holding ``data`` at ``offset``; returns (buffer, address of data)."""
    size = max(total or 0, offset + len(data))
    buffer = ctypes.create_string_buffer(size)
    ctypes.memmove(ctypes.addressof(buffer) + offset, data, len(data))
    return buffer, ctypes.addressof(buffer) + offset


def read_buffer(buffer, offset, size):
    return ctypes.string_at(ctypes.addressof(buffer) + offset, size)


class DeviceBytes:
    """A device allocation with a host model of what it must hold."""

    def __init__(self, runtime, device, size, seed, stream):
        self.runtime, self.device, self.size = runtime, device, size
        self.address = runtime.malloc(device, size)
        self.model = bytearray(pattern(size, seed))
        self._keep = [runtime.upload(self.address, bytes(self.model), stream)]

    def write(self, offset, data, stream, host_offset=0):
        buffer, address = buffer_at(data, host_offset)
        self.runtime.check(self.runtime.copy(self.address + offset, address, len(data), k.HOST_TO_DEVICE, stream))
        self._keep.append(buffer)
        self.model[offset:offset + len(data)] = data

    def verify(self, stream, what):
        got = self.runtime.download(self.address, self.size, stream)
        if got != bytes(self.model):
            first = next(i for i in range(self.size) if got[i] != self.model[i])
            raise AssertionError(f"{what}: device {self.device} memory differs from what was written, first at byte {first}")

    def free(self):
        self.runtime.check(self.runtime.kpdrFree(self.device, ctypes.c_void_p(self.address)))


# --- initialisation, errors, devices --------------------------------------------


def check_exports_the_abi(ctx):
    """Every one of the 25 functions is exported and kpdrGetAbiVersion matches the header."""
    runtime = ctx.uninitialised()  # raises, naming what is missing
    version = runtime.kpdrGetAbiVersion()
    assert version == k.ABI_VERSION, f"kpdrGetAbiVersion() is {version}, the header's KPDR_ABI_VERSION is {k.ABI_VERSION}"


def check_calls_before_init_are_not_initialized(ctx):
    runtime = ctx.uninitialised()
    expect(runtime.kpdrGetDeviceCount(ctypes.byref(ctypes.c_int())), k.ERROR_NOT_INITIALIZED, "kpdrGetDeviceCount before kpdrInit")
    expect(runtime.kpdrMalloc(0, ctypes.byref(ctypes.c_void_p()), 64), k.ERROR_NOT_INITIALIZED, "kpdrMalloc before kpdrInit")
    expect(runtime.kpdrStreamCreate(0, 0, ctypes.byref(ctypes.c_void_p())), k.ERROR_NOT_INITIALIZED, "kpdrStreamCreate before kpdrInit")
    expect(runtime.kpdrEventCreate(0, 0, ctypes.byref(ctypes.c_void_p())), k.ERROR_NOT_INITIALIZED, "kpdrEventCreate before kpdrInit")
    assert runtime.kpdrGetErrorString(k.ERROR_NOT_INITIALIZED), "kpdrGetErrorString must work before kpdrInit"
    runtime.init(ctx.options)
    assert runtime.device_count() >= 1


def check_second_init_is_already_initialized(ctx):
    runtime = ctx.runtime()
    count = runtime.device_count()
    expect(runtime.kpdrInit(None), k.ERROR_ALREADY_INITIALIZED, "a second kpdrInit", runtime)
    assert runtime.device_count() == count, "a second kpdrInit changed the device count"


def check_error_strings_name_each_code(ctx):
    runtime = ctx.uninitialised()
    strings = {}
    for code in k.ALL_ERROR_CODES:
        text = runtime.kpdrGetErrorString(code)
        assert text, f"kpdrGetErrorString({code}) returned NULL or an empty string"
        text = text.decode(errors="replace")
        assert k.ERROR_NAMES[code] in text, f"kpdrGetErrorString({code}) = {text!r} does not name {k.ERROR_NAMES[code]}"
        strings[code] = text
    assert len(set(strings.values())) == len(strings), f"two codes share a description: {strings}"


def check_devices_report_their_properties(ctx):
    runtime = ctx.runtime()
    count = runtime.device_count()
    assert count >= 1, f"kpdrGetDeviceCount gave {count}; a runtime has at least one device"
    for device in range(count):
        props = runtime.properties(device)
        assert props.name.decode(errors="replace").strip(), f"device {device} has an empty name"
        assert props.total_memory > 0, f"device {device}: total_memory is 0"
        assert props.compute_units >= 1, f"device {device}: compute_units is {props.compute_units}"
        assert props.host_addressable in (0, 1), f"device {device}: host_addressable is {props.host_addressable}"
        assert list(props.reserved) == [0] * 16, f"device {device}: reserved fields are not zero"
        free, total = runtime.mem_info(device)
        assert total == props.total_memory, f"device {device}: kpdrMemGetInfo total {total} != total_memory {props.total_memory}"
        assert 0 < free <= total, f"device {device}: {free} bytes free of {total}"


def check_out_of_range_device_is_invalid_device(ctx):
    runtime = ctx.runtime()
    count = runtime.device_count()
    props = k.DeviceProperties()
    for device in (count, -1):
        expect(runtime.kpdrGetDeviceProperties(device, ctypes.byref(props)), k.ERROR_INVALID_DEVICE, f"kpdrGetDeviceProperties({device})", runtime)
        expect_message(runtime, f"kpdrGetDeviceProperties({device})")
        expect(runtime.kpdrDeviceSynchronize(device), k.ERROR_INVALID_DEVICE, f"kpdrDeviceSynchronize({device})", runtime)
        expect(runtime.kpdrMalloc(device, ctypes.byref(ctypes.c_void_p()), 64), k.ERROR_INVALID_DEVICE, f"kpdrMalloc on device {device}", runtime)
        expect(runtime.kpdrStreamCreate(device, 0, ctypes.byref(ctypes.c_void_p())), k.ERROR_INVALID_DEVICE, f"kpdrStreamCreate on device {device}", runtime)
        expect(runtime.kpdrEventCreate(device, 0, ctypes.byref(ctypes.c_void_p())), k.ERROR_INVALID_DEVICE, f"kpdrEventCreate on device {device}", runtime)


def check_null_output_pointers_are_invalid_value(ctx):
    runtime = ctx.runtime()
    expect(runtime.kpdrGetDeviceCount(None), k.ERROR_INVALID_VALUE, "kpdrGetDeviceCount(NULL)", runtime)
    expect(runtime.kpdrGetDeviceProperties(0, None), k.ERROR_INVALID_VALUE, "kpdrGetDeviceProperties(0, NULL)", runtime)
    expect(runtime.kpdrMalloc(0, None, 64), k.ERROR_INVALID_VALUE, "kpdrMalloc(0, NULL, 64)", runtime)
    expect(runtime.kpdrStreamCreate(0, 0, None), k.ERROR_INVALID_VALUE, "kpdrStreamCreate(0, 0, NULL)", runtime)
    expect(runtime.kpdrEventCreate(0, 0, None), k.ERROR_INVALID_VALUE, "kpdrEventCreate(0, 0, NULL)", runtime)


# --- memory -------------------------------------------------------------------


def check_allocations_are_aligned_and_owned(ctx):
    runtime = ctx.runtime()
    for device in range(runtime.device_count()):
        for size in (1, 100, 4096, MIB + 3):
            address = runtime.malloc(device, size)
            assert address % 64 == 0, f"kpdrMalloc({size}) on device {device} gave {address:#x}, not 64-byte aligned"
            for inside in (address, address + size - 1):
                owner = runtime.pointer_device(inside)
                assert owner == device, f"kpdrPointerGetDevice({inside:#x}) is {owner}, allocated on device {device}"
            runtime.check(runtime.kpdrFree(device, ctypes.c_void_p(address)))
    pinned = runtime.malloc_host(4096)
    assert pinned, "kpdrMallocHost(4096) gave NULL"
    assert runtime.pointer_device(pinned) == -1 and runtime.pointer_device(pinned + 4095) == -1, "pinned memory must report device -1"
    runtime.check(runtime.kpdrFreeHost(ctypes.c_void_p(pinned)))


def check_zero_sizes_and_null_frees_succeed(ctx):
    runtime = ctx.runtime()
    address = runtime.malloc(0, 0)
    runtime.check(runtime.kpdrFree(0, ctypes.c_void_p(address) if address else None))
    expect(runtime.kpdrFree(0, None), k.SUCCESS, "kpdrFree(0, NULL)", runtime)
    stream = runtime.stream(0)
    device = runtime.malloc(0, 64)
    host = ctypes.create_string_buffer(64)
    for kind, dst, src in ((k.HOST_TO_DEVICE, device, host), (k.DEVICE_TO_HOST, host, device), (k.DEVICE_TO_DEVICE, device, device)):
        expect(runtime.copy(dst, src, 0, kind, stream), k.SUCCESS, f"a 0-byte copy of kind {kind}", runtime)
    runtime.check(runtime.kpdrStreamSynchronize(stream))


def check_unknown_and_double_frees_are_invalid_handle(ctx):
    runtime = ctx.runtime()
    stranger = ctypes.create_string_buffer(256)  # host memory the runtime never saw
    expect(runtime.kpdrFree(0, ctypes.cast(stranger, ctypes.c_void_p)), k.ERROR_INVALID_HANDLE, "kpdrFree of a pointer the runtime never gave out", runtime)
    expect_message(runtime, "kpdrFree of an unknown pointer")
    address = runtime.malloc(0, 256)
    runtime.check(runtime.kpdrFree(0, ctypes.c_void_p(address)))
    expect(runtime.kpdrFree(0, ctypes.c_void_p(address)), k.ERROR_INVALID_HANDLE, "a second kpdrFree of one allocation", runtime)
    expect(runtime.kpdrFreeHost(ctypes.cast(stranger, ctypes.c_void_p)), k.ERROR_INVALID_HANDLE, "kpdrFreeHost of unknown memory", runtime)
    pinned = runtime.malloc_host(64)
    runtime.check(runtime.kpdrFreeHost(ctypes.c_void_p(pinned)))
    expect(runtime.kpdrFreeHost(ctypes.c_void_p(pinned)), k.ERROR_INVALID_HANDLE, "a second kpdrFreeHost", runtime)
    device = ctypes.c_int()
    expect(runtime.kpdrPointerGetDevice(ctypes.cast(stranger, ctypes.c_void_p), ctypes.byref(device)), k.ERROR_INVALID_HANDLE, "kpdrPointerGetDevice of unknown memory", runtime)


def check_mem_get_info_tracks_allocations(ctx):
    runtime = ctx.runtime()
    for device in range(runtime.device_count()):
        free_before, total = runtime.mem_info(device)
        size = max(MIB, min(total // 8, 256 * MIB))
        address = runtime.malloc(device, size)
        free_during = runtime.mem_info(device)[0]
        assert free_during <= free_before - size, (
            f"device {device}: {size} bytes allocated but free memory went from {free_before} to {free_during} bytes")
        runtime.check(runtime.kpdrFree(device, ctypes.c_void_p(address)))
        free_after = runtime.mem_info(device)[0]
        slack = max(MIB, total // 100)
        assert free_after >= free_before - slack, (
            f"device {device}: free memory did not come back after kpdrFree ({free_before} -> {free_after} bytes)")


def check_out_of_memory_is_clean_and_the_device_stays_usable(ctx):
    runtime = ctx.runtime()
    total = runtime.properties(0).total_memory
    for size in (total + total // 4 + MIB, 1 << 62):
        pointer = ctypes.c_void_p()
        expect(runtime.kpdrMalloc(0, ctypes.byref(pointer), size), k.ERROR_OUT_OF_MEMORY, f"kpdrMalloc of {size} bytes (capacity {total})", runtime)
        expect_message(runtime, "an out-of-memory kpdrMalloc")
    stream = runtime.stream(0)
    address = runtime.malloc(0, MIB)
    data = pattern(MIB, 11)
    keep = runtime.upload(address, data, stream)
    assert runtime.download(address, MIB, stream) == data, "after an out-of-memory error a round trip gave wrong bytes"
    del keep


def check_filling_a_device_ends_in_out_of_memory(ctx):
    runtime = ctx.runtime()
    device = runtime.device_count() - 1
    free_before, total = runtime.mem_info(device)
    chunk = total // 8
    allocations, failure = [], None
    for _ in range(16):
        pointer = ctypes.c_void_p()
        code = runtime.kpdrMalloc(device, ctypes.byref(pointer), chunk)
        if code != k.SUCCESS:
            failure = code
            break
        allocations.append(pointer.value)
    assert failure is not None, f"device {device} gave out 16 x {chunk} bytes with a capacity of {total}"
    expect(failure, k.ERROR_OUT_OF_MEMORY, f"allocating {chunk}-byte chunks until device {device} is full", runtime)
    assert len(allocations) >= 6, f"only {len(allocations)} of 8 eighths of device {device} could be allocated"
    for address in allocations:
        runtime.check(runtime.kpdrFree(device, ctypes.c_void_p(address)))
    free_after = runtime.mem_info(device)[0]
    assert free_after >= free_before - max(MIB, total // 100), f"device {device}: {free_before - free_after} bytes lost after freeing everything"


def check_many_small_allocations(ctx):
    runtime = ctx.runtime()
    free_before = runtime.mem_info(0)[0]
    generator = random.Random(5)
    addresses = [runtime.malloc(0, generator.randint(1, 9000)) for _ in range(2000)]
    assert len(set(addresses)) == len(addresses), "two live allocations share an address"
    generator.shuffle(addresses)
    for address in addresses:
        runtime.check(runtime.kpdrFree(0, ctypes.c_void_p(address)))
    assert runtime.mem_info(0)[0] >= free_before - MIB, "2000 allocations freed in random order did not give their memory back"


# --- copies -----------------------------------------------------------------------

COPY_SIZES = (1, 3, 64, 1000, 4096 + 7, MIB + 13)
DEVICE_OFFSETS = (0, 1, 3, 69)
HOST_OFFSETS = (0, 5)


def check_host_device_copies_of_every_size_and_alignment(ctx):
    runtime = ctx.runtime()
    for device in sorted({0, runtime.device_count() - 1}):
        stream = runtime.stream(device)
        target = DeviceBytes(runtime, device, 2 * MIB + 256, seed=1, stream=stream)
        seed = 100
        for size in COPY_SIZES:
            for device_offset in DEVICE_OFFSETS:
                for host_offset in HOST_OFFSETS:
                    seed += 1
                    data = pattern(size, seed)
                    what = f"device {device}: {size} bytes at device offset {device_offset}, host offset {host_offset}"
                    target.write(device_offset, data, stream, host_offset)
                    back = ctypes.create_string_buffer(size + 9)
                    runtime.check(runtime.copy(ctypes.addressof(back) + 9, target.address + device_offset, size, k.DEVICE_TO_HOST, stream))
                    runtime.check(runtime.kpdrStreamSynchronize(stream))
                    assert read_buffer(back, 9, size) == data, f"{what}: the device-to-host copy gave other bytes"
        target.verify(stream, f"device {device} after {seed - 100} copies of every size and alignment")
        target.free()


def check_pinned_host_memory_copies(ctx):
    runtime = ctx.runtime()
    stream = runtime.stream(0)
    size = MIB + 7
    source, destination = runtime.malloc_host(size + 16), runtime.malloc_host(size + 16)
    data = pattern(size, 21)
    ctypes.memmove(source + 3, data, size)
    device = runtime.malloc(0, size + 64)
    runtime.check(runtime.copy(device + 5, source + 3, size, k.HOST_TO_DEVICE, stream))
    runtime.check(runtime.copy(destination + 11, device + 5, size, k.DEVICE_TO_HOST, stream))
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    assert ctypes.string_at(destination + 11, size) == data, "a pinned -> device -> pinned round trip gave other bytes"
    for pointer in (source, destination):
        runtime.check(runtime.kpdrFreeHost(ctypes.c_void_p(pointer)))
    runtime.check(runtime.kpdrFree(0, ctypes.c_void_p(device)))


def _device_to_device(runtime, source_device, target_device, stream_device):
    stream = runtime.stream(stream_device)
    source = DeviceBytes(runtime, source_device, 2 * MIB, seed=31, stream=runtime.stream(source_device))
    target = DeviceBytes(runtime, target_device, 2 * MIB, seed=32, stream=runtime.stream(target_device))
    runtime.check(runtime.kpdrDeviceSynchronize(source_device))
    runtime.check(runtime.kpdrDeviceSynchronize(target_device))
    for size in (1, 5, 4096 + 3, MIB + 1):
        for source_offset, target_offset in ((0, 0), (1, 7), (64, 3), (13, 64)):
            runtime.check(runtime.copy(target.address + target_offset, source.address + source_offset, size, k.DEVICE_TO_DEVICE, stream))
            target.model[target_offset:target_offset + size] = source.model[source_offset:source_offset + size]
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    target.verify(runtime.stream(target_device), f"device-to-device copies from device {source_device} to {target_device} on a stream of device {stream_device}")
    source.verify(runtime.stream(source_device), "the source of device-to-device copies")


def check_device_to_device_copies_on_one_device(ctx):
    _device_to_device(ctx.runtime(), 0, 0, 0)


def check_device_to_device_copies_across_devices_on_either_stream(ctx):
    runtime = ctx.runtime()
    need_devices(runtime, 2)
    for stream_device in (0, 1):
        _device_to_device(runtime, 0, 1, stream_device)


def check_copies_outside_their_allocation_or_of_a_bad_kind_are_invalid_value(ctx):
    runtime = ctx.runtime()
    stream = runtime.stream(0)
    device, other = runtime.malloc(0, 1024), runtime.malloc(0, 1024)
    host = ctypes.create_string_buffer(2048)
    cases = (
        ("a host-to-device copy running past the end of its allocation", device + 1000, host, 100, k.HOST_TO_DEVICE),
        ("a device-to-host copy running past the end of its allocation", host, device + 1, 1024, k.DEVICE_TO_HOST),
        ("a device-to-device copy running past its destination", device + 512, other, 1024, k.DEVICE_TO_DEVICE),
        ("a host-to-device copy into host memory", host, host, 64, k.HOST_TO_DEVICE),
        ("a device-to-device copy from host memory", device, host, 64, k.DEVICE_TO_DEVICE),
        ("a copy of kind 42", device, other, 64, 42),
    )
    for what, dst, src, size, kind in cases:
        expect(runtime.copy(dst, src, size, kind, stream), k.ERROR_INVALID_VALUE, what, runtime)
        expect_message(runtime, what)
    runtime.check(runtime.kpdrStreamSynchronize(stream))


def check_copies_on_a_stream_of_another_device_are_invalid_value(ctx):
    runtime = ctx.runtime()
    need_devices(runtime, 2)
    on_one = runtime.malloc(1, 64)
    host = ctypes.create_string_buffer(64)
    stream_of_0 = runtime.stream(0)
    expect(runtime.copy(on_one, host, 64, k.HOST_TO_DEVICE, stream_of_0), k.ERROR_INVALID_VALUE,
           "a host-to-device copy into device 1 on a stream of device 0", runtime)
    expect(runtime.copy(host, on_one, 64, k.DEVICE_TO_HOST, stream_of_0), k.ERROR_INVALID_VALUE,
           "a device-to-host copy from device 1 on a stream of device 0", runtime)


# --- streams and events -------------------------------------------------------------


def check_a_stream_runs_its_work_in_submission_order(ctx):
    runtime = ctx.runtime()
    size = 8 * MIB
    stream = runtime.stream(0)
    first, second = runtime.malloc(0, size), runtime.malloc(0, size)
    payloads = [pattern(size, seed) for seed in (41, 42, 43)]
    keep = [runtime.upload(first, payloads[0], stream), runtime.upload(first, payloads[1], stream)]
    runtime.check(runtime.copy(second, first, size, k.DEVICE_TO_DEVICE, stream))
    keep.append(runtime.upload(first, payloads[2], stream))
    copied, last = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
    runtime.check(runtime.copy(copied, second, size, k.DEVICE_TO_HOST, stream))
    runtime.check(runtime.copy(last, first, size, k.DEVICE_TO_HOST, stream))
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    assert copied.raw == payloads[1], "a device-to-device copy did not see the upload submitted just before it"
    assert last.raw == payloads[2], "the last upload to a buffer was overtaken by an earlier one"
    del keep


def check_stream_query_and_synchronize(ctx):
    runtime = ctx.runtime()
    stream = runtime.stream(0, priority=-1)
    expect(runtime.kpdrStreamQuery(stream), k.SUCCESS, "kpdrStreamQuery of a new stream", runtime)
    expect(runtime.kpdrStreamSynchronize(stream), k.SUCCESS, "kpdrStreamSynchronize of a new stream", runtime)
    address = runtime.malloc(0, 8 * MIB)
    keep = runtime.upload(address, pattern(8 * MIB, 3), stream)
    expect(runtime.kpdrStreamQuery(stream), (k.SUCCESS, k.ERROR_NOT_READY), "kpdrStreamQuery with a copy queued", runtime)
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    expect(runtime.kpdrStreamQuery(stream), k.SUCCESS, "kpdrStreamQuery after kpdrStreamSynchronize", runtime)
    del keep


def check_device_synchronize_waits_for_every_stream(ctx):
    runtime = ctx.runtime()
    size = 4 * MIB
    streams = [runtime.stream(0), runtime.stream(0)]
    outputs, keep = [], []
    for seed, stream in enumerate(streams):
        address = runtime.malloc(0, size)
        keep.append(runtime.upload(address, pattern(size, seed), stream))
        out = ctypes.create_string_buffer(size)
        runtime.check(runtime.copy(out, address, size, k.DEVICE_TO_HOST, stream))
        outputs.append(out)
    runtime.check(runtime.kpdrDeviceSynchronize(0))
    for seed, (stream, out) in enumerate(zip(streams, outputs)):
        assert out.raw == pattern(size, seed), "kpdrDeviceSynchronize returned before a stream's copies had run"
        expect(runtime.kpdrStreamQuery(stream), k.SUCCESS, "kpdrStreamQuery after kpdrDeviceSynchronize", runtime)


def check_destroying_a_stream_finishes_its_work(ctx):
    runtime = ctx.runtime()
    size = 4 * MIB
    stream = runtime.stream(0)
    address = runtime.malloc(0, size)
    data = pattern(size, 8)
    keep = runtime.upload(address, data, stream)
    out = ctypes.create_string_buffer(size)
    runtime.check(runtime.copy(out, address, size, k.DEVICE_TO_HOST, stream))
    runtime.check(runtime.kpdrStreamDestroy(stream))
    assert out.raw == data, "kpdrStreamDestroy returned before the stream's pending copies had run"
    del keep


def check_destroyed_handles_are_invalid_handle(ctx):
    runtime = ctx.runtime()
    address = runtime.malloc(0, 64)
    host = ctypes.create_string_buffer(64)
    stream, event, live_stream = runtime.stream(0), runtime.event(0), runtime.stream(0)
    runtime.check(runtime.kpdrStreamDestroy(stream))
    runtime.check(runtime.kpdrEventDestroy(event))
    calls = (
        ("kpdrStreamQuery", lambda: runtime.kpdrStreamQuery(stream)),
        ("kpdrStreamSynchronize", lambda: runtime.kpdrStreamSynchronize(stream)),
        ("kpdrMemcpyAsync", lambda: runtime.copy(address, host, 64, k.HOST_TO_DEVICE, stream)),
        ("kpdrStreamWaitEvent", lambda: runtime.kpdrStreamWaitEvent(live_stream, event)),
        ("kpdrEventRecord", lambda: runtime.kpdrEventRecord(event, live_stream)),
        ("kpdrEventQuery", lambda: runtime.kpdrEventQuery(event)),
        ("kpdrEventSynchronize", lambda: runtime.kpdrEventSynchronize(event)),
        ("kpdrStreamDestroy", lambda: runtime.kpdrStreamDestroy(stream)),
        ("kpdrEventDestroy", lambda: runtime.kpdrEventDestroy(event)),
    )
    for name, call in calls:
        expect(call(), k.ERROR_INVALID_HANDLE, f"{name} with a destroyed handle", runtime)
    expect(runtime.kpdrEventCreate(0, 8, ctypes.byref(ctypes.c_void_p())), k.ERROR_INVALID_VALUE, "kpdrEventCreate with unknown flag bits", runtime)


def check_events_record_query_and_synchronize(ctx):
    runtime = ctx.runtime()
    stream, event = runtime.stream(0), runtime.event(0)
    expect(runtime.kpdrEventQuery(event), k.SUCCESS, "kpdrEventQuery of a never recorded event", runtime)
    expect(runtime.kpdrEventSynchronize(event), k.SUCCESS, "kpdrEventSynchronize of a never recorded event", runtime)
    size = 8 * MIB
    address = runtime.malloc(0, size)
    data = pattern(size, 9)
    keep = runtime.upload(address, data, stream)
    out = ctypes.create_string_buffer(size)
    runtime.check(runtime.copy(out, address, size, k.DEVICE_TO_HOST, stream))
    runtime.check(runtime.kpdrEventRecord(event, stream))
    expect(runtime.kpdrEventQuery(event), (k.SUCCESS, k.ERROR_NOT_READY), "kpdrEventQuery after work", runtime)
    runtime.check(runtime.kpdrEventSynchronize(event))
    assert out.raw == data, "kpdrEventSynchronize returned before the work recorded in the event had run"
    expect(runtime.kpdrEventQuery(event), k.SUCCESS, "kpdrEventQuery after kpdrEventSynchronize", runtime)
    runtime.check(runtime.kpdrEventRecord(event, stream))  # re-recording is allowed
    runtime.check(runtime.kpdrEventSynchronize(event))
    del keep


def check_elapsed_time_between_events(ctx):
    runtime = ctx.runtime()
    stream = runtime.stream(0)
    start, end = runtime.event(0), runtime.event(0)
    untimed, unrecorded = runtime.event(0, k.EVENT_DISABLE_TIMING), runtime.event(0)
    size = 8 * MIB
    address = runtime.malloc(0, size)
    runtime.check(runtime.kpdrEventRecord(start, stream))
    keep = runtime.upload(address, pattern(size, 4), stream)
    runtime.check(runtime.kpdrEventRecord(end, stream))
    runtime.check(runtime.kpdrEventRecord(untimed, stream))
    runtime.check(runtime.kpdrEventSynchronize(end))
    runtime.check(runtime.kpdrEventSynchronize(untimed))
    code, elapsed = runtime.elapsed_ms(start, end)
    expect(code, k.SUCCESS, "kpdrEventElapsedTime of two completed events", runtime)
    assert math.isfinite(elapsed) and 0.0 <= elapsed < 60_000, f"elapsed time {elapsed} ms for an 8 MiB copy"
    expect(runtime.elapsed_ms(start, untimed)[0], k.ERROR_INVALID_VALUE, "kpdrEventElapsedTime with a DISABLE_TIMING event", runtime)
    expect(runtime.elapsed_ms(start, unrecorded)[0], k.ERROR_INVALID_VALUE, "kpdrEventElapsedTime with a never recorded event", runtime)
    del keep


def _cross_stream(runtime, consumer_device):
    size = 16 * MIB
    producer, consumer = runtime.stream(0), runtime.stream(consumer_device)
    produced, consumed = runtime.malloc(0, size), runtime.malloc(consumer_device, size)
    zeros = [runtime.upload(produced, bytes(size), producer), runtime.upload(consumed, bytes(size), consumer)]
    runtime.check(runtime.kpdrDeviceSynchronize(0))
    runtime.check(runtime.kpdrDeviceSynchronize(consumer_device))
    ready = runtime.event(0)
    data = pattern(size, 77)
    keep = runtime.upload(produced, data, producer)
    runtime.check(runtime.kpdrEventRecord(ready, producer))
    runtime.check(runtime.kpdrStreamWaitEvent(consumer, ready))
    runtime.check(runtime.copy(consumed, produced, size, k.DEVICE_TO_DEVICE, consumer))
    out = ctypes.create_string_buffer(size)
    runtime.check(runtime.copy(out, consumed, size, k.DEVICE_TO_HOST, consumer))
    runtime.check(runtime.kpdrStreamSynchronize(consumer))  # the consumer only: the wait must order it
    assert out.raw == data, f"a stream of device {consumer_device} waiting on an event ran before the work the event recorded"
    runtime.check(runtime.kpdrStreamSynchronize(producer))
    del zeros, keep


def check_stream_wait_event_orders_work_across_streams(ctx):
    _cross_stream(ctx.runtime(), 0)


def check_stream_wait_event_orders_work_across_devices(ctx):
    runtime = ctx.runtime()
    need_devices(runtime, 2)
    _cross_stream(runtime, 1)


def check_waiting_on_a_never_recorded_event_does_not_block(ctx):
    runtime = ctx.runtime()
    stream, event = runtime.stream(0), runtime.event(0)
    runtime.check(runtime.kpdrStreamWaitEvent(stream, event))
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    expect(runtime.kpdrStreamQuery(stream), k.SUCCESS, "kpdrStreamQuery after waiting on a never recorded event", runtime)


# --- threads ----------------------------------------------------------------------


def check_threads_share_the_runtime(ctx):
    runtime = ctx.runtime()
    devices = runtime.device_count()
    errors = []

    def work(worker):
        try:
            for iteration in range(10):
                device = (worker + iteration) % devices
                stream, event = runtime.stream(device), runtime.event(device)
                size = 64 * 1024 + worker * 8 + iteration
                first, second = runtime.malloc(device, size), runtime.malloc(device, size)
                data = pattern(size, worker * 100 + iteration)
                keep = runtime.upload(first, data, stream)
                runtime.check(runtime.copy(second, first, size, k.DEVICE_TO_DEVICE, stream))
                runtime.check(runtime.kpdrEventRecord(event, stream))
                runtime.check(runtime.kpdrEventSynchronize(event))
                if runtime.download(second, size, stream) != data:
                    raise AssertionError(f"thread {worker}, iteration {iteration}: wrong bytes on device {device}")
                for address in (first, second):
                    runtime.check(runtime.kpdrFree(device, ctypes.c_void_p(address)))
                runtime.check(runtime.kpdrEventDestroy(event))
                runtime.check(runtime.kpdrStreamDestroy(stream))
                del keep
        except Exception as error:  # collected and raised in the checking thread
            errors.append(f"thread {worker}: {first_line(error)}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads), "a thread is still running after 120 s (deadlock?)"
    assert not errors, "; ".join(errors[:3])


def check_last_error_message_is_per_thread(ctx):
    runtime = ctx.runtime()
    expect(runtime.kpdrDeviceSynchronize(runtime.device_count()), k.ERROR_INVALID_DEVICE, "kpdrDeviceSynchronize out of range", runtime)
    mine = runtime.last_error_message()
    other = []

    def fail_differently():
        runtime.kpdrFree(0, ctypes.cast(ctypes.create_string_buffer(8), ctypes.c_void_p))
        other.append(runtime.last_error_message())

    thread = threading.Thread(target=fail_differently)
    thread.start()
    thread.join()
    assert other and other[0] != mine, "two different failures gave the same message"
    assert runtime.last_error_message() == mine, "another thread's failure replaced this thread's kpdrGetLastErrorMessage()"


def check_many_streams_and_events(ctx):
    runtime = ctx.runtime()
    handles = []
    for i in range(200):
        handles.append((runtime.stream(i % runtime.device_count()), runtime.event(i % runtime.device_count())))
    for stream, event in handles:
        runtime.check(runtime.kpdrEventRecord(event, stream))
    for stream, event in handles:
        runtime.check(runtime.kpdrEventSynchronize(event))
        runtime.check(runtime.kpdrEventDestroy(event))
        runtime.check(runtime.kpdrStreamDestroy(stream))


CHECKS = {name[len("check_"):]: function for name, function in sorted(globals().items()) if name.startswith("check_")}
# The order checks run in: the source order (cheap ones first), not the alphabet.
CHECKS = dict(sorted(CHECKS.items(), key=lambda item: item[1].__code__.co_firstlineno))


def main(argv=None):
    parser = argparse.ArgumentParser(description="kpdr ABI contract checks (a worker of the conformance kit)")
    parser.add_argument("--items", required=True, help="comma-separated check names, or 'all'")
    args = parser.parse_args(argv)
    library = os.environ.get("MY_ASIC_RUNTIME")
    if not library:
        parser.error("set MY_ASIC_RUNTIME to the runtime library")
    ctx = Context(library, os.environ.get("MY_ASIC_RUNTIME_OPTIONS", ""))
    names = list(CHECKS) if args.items == "all" else args.items.split(",")
    try:
        for name in names:
            check = CHECKS.get(name)
            if check is None:
                emit(name, "skip: no such check")
                continue
            try:
                check(ctx)
                emit(name, "pass")
            except Skip as skip:
                emit(name, f"skip: {skip}")
            except Exception as error:  # a failed check is data, reported per check
                emit(name, "fail: " + first_line(error))
    finally:
        ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
