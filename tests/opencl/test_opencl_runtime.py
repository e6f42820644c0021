"""The kpdr ABI as the OpenCL runtime implements it, through ctypes.

Runs on whatever OpenCL platform is installed (PoCL on CPUs in CI); skips without one.
"""

import ctypes
import os
import subprocess
import sys
import textwrap
import time

import pytest

from kernel_pytorch.asic.conformance.kpdr_ctypes import (
    DEVICE_TO_DEVICE,
    DEVICE_TO_HOST,
    ERROR_INVALID_DEVICE,
    ERROR_INVALID_HANDLE,
    ERROR_INVALID_VALUE,
    ERROR_NOT_READY,
    ERROR_OUT_OF_MEMORY,
    EVENT_DISABLE_TIMING,
    HOST_TO_DEVICE,
    MIB,
    SUCCESS,
)

from opencl_support import REPO_ROOT


def test_devices_are_the_platforms_opencl_devices_named_with_their_real_name(opencl):
    props = opencl.properties(0)
    assert props.name.decode().endswith(" (OpenCL)")
    assert props.total_memory > 0 and props.compute_units >= 1


def test_device_memory_is_not_host_addressable_and_pointers_lie_outside_user_space(opencl):
    assert opencl.properties(0).host_addressable == 0
    address = opencl.malloc(0, 4096)
    assert address >= 1 << 56  # no host mapping lives there: a dereference would fault


def test_host_to_device_to_host_round_trip_at_interior_offsets(opencl):
    stream = opencl.stream(0)
    base = opencl.malloc(0, 1 * MIB)
    data = bytes(range(256)) * 16
    keep = opencl.upload(base + 1000, data, stream)
    assert opencl.download(base + 1000, len(data), stream) == data
    assert opencl.download(base + 1000 + 17, 100, stream) == data[17:117]
    del keep


def test_device_to_device_copy_between_allocations(opencl):
    stream = opencl.stream(0)
    a, b = opencl.malloc(0, 4096), opencl.malloc(0, 4096)
    keep = opencl.upload(a, b"x" * 100 + b"payload" + b"y" * 100, stream)
    opencl.check(opencl.copy(b + 8, a + 100, 7, DEVICE_TO_DEVICE, stream))
    assert opencl.download(b + 8, 7, stream) == b"payload"
    del keep


def test_overlapping_copy_inside_one_allocation_behaves_like_memmove(opencl):
    stream = opencl.stream(0)
    a = opencl.malloc(0, 4096)
    keep = opencl.upload(a, bytes(range(64)), stream)
    opencl.check(opencl.copy(a + 8, a, 32, DEVICE_TO_DEVICE, stream))
    assert opencl.download(a, 48, stream) == bytes(range(8)) + bytes(range(32)) + bytes(range(40, 48))
    del keep


def test_copy_running_past_the_allocation_is_rejected(opencl):
    stream = opencl.stream(0)
    a = opencl.malloc(0, 256)
    host = ctypes.create_string_buffer(512)
    assert opencl.copy(a + 128, host, 256, HOST_TO_DEVICE, stream) == ERROR_INVALID_VALUE
    assert "past the end" in opencl.last_error_message()


def test_copy_kind_must_match_where_the_pointers_live(opencl):
    stream = opencl.stream(0)
    a = opencl.malloc(0, 256)
    host = ctypes.create_string_buffer(256)
    assert opencl.copy(host, a, 16, HOST_TO_DEVICE, stream) == ERROR_INVALID_VALUE
    assert opencl.copy(a, a + 64, 16, DEVICE_TO_HOST, stream) == ERROR_INVALID_VALUE
    assert opencl.copy(a, host, 16, 9, stream) == ERROR_INVALID_VALUE


def test_pointer_lookup_finds_the_owner_of_interior_addresses_and_pinned_memory(opencl):
    a = opencl.malloc(0, 1000)
    pinned = opencl.malloc_host(4096)
    assert opencl.pointer_device(a + 999) == 0
    assert opencl.pointer_device(pinned + 10) == -1
    device = ctypes.c_int()
    assert opencl.kpdrPointerGetDevice(ctypes.c_void_p(a + 1000), ctypes.byref(device)) == ERROR_INVALID_HANDLE


def test_pinned_memory_is_host_memory_usable_for_async_copies(opencl):
    stream = opencl.stream(0)
    pinned = opencl.malloc_host(4096)
    ctypes.memmove(pinned, b"pinned!", 7)
    a = opencl.malloc(0, 4096)
    opencl.check(opencl.copy(a, pinned, 7, HOST_TO_DEVICE, stream))
    back = opencl.malloc_host(4096)
    opencl.check(opencl.copy(back, a, 7, DEVICE_TO_HOST, stream))
    opencl.check(opencl.kpdrStreamSynchronize(stream))
    assert ctypes.string_at(back, 7) == b"pinned!"
    opencl.check(opencl.kpdrFreeHost(ctypes.c_void_p(pinned)))
    assert opencl.kpdrFreeHost(ctypes.c_void_p(pinned)) == ERROR_INVALID_HANDLE


def test_mem_get_info_charges_allocations_and_frees_return_them(load_opencl):
    runtime = load_opencl("memory_mb=64")
    free0, total = runtime.mem_info(0)
    assert total == 64 * MIB and free0 == total
    a = runtime.malloc(0, 10 * MIB + 1)
    free1, _ = runtime.mem_info(0)
    assert free0 - free1 == 10 * MIB + 256  # 256-byte granules
    runtime.check(runtime.kpdrFree(0, ctypes.c_void_p(a)))
    assert runtime.mem_info(0)[0] == free0


def test_out_of_memory_is_clean_names_sizes_and_the_device_stays_usable(load_opencl):
    runtime = load_opencl("memory_mb=64")
    keep = runtime.malloc(0, 40 * MIB)
    ptr = ctypes.c_void_p()
    assert runtime.kpdrMalloc(0, ctypes.byref(ptr), 40 * MIB) == ERROR_OUT_OF_MEMORY
    message = runtime.last_error_message()
    assert "requested 40.00 MiB" in message and "free" in message and "64.00 MiB" in message
    assert runtime.malloc(0, 20 * MIB) != 0
    assert keep


def test_allocation_beyond_one_buffers_limit_is_out_of_memory_naming_the_limit(opencl):
    _, total = opencl.mem_info(0)
    ptr = ctypes.c_void_p()
    assert opencl.kpdrMalloc(0, ctypes.byref(ptr), total + 1) == ERROR_OUT_OF_MEMORY
    assert "CL_DEVICE_MAX_MEM_ALLOC_SIZE" in opencl.last_error_message()


def test_free_of_interior_pointer_is_invalid_value_and_double_free_invalid_handle(opencl):
    a = opencl.malloc(0, 4096)
    assert opencl.kpdrFree(0, ctypes.c_void_p(a + 64)) == ERROR_INVALID_VALUE
    assert opencl.kpdrFree(0, ctypes.c_void_p(a)) == SUCCESS
    assert opencl.kpdrFree(0, ctypes.c_void_p(a)) == ERROR_INVALID_HANDLE


def test_zero_byte_allocation_is_null_and_freeing_null_succeeds(opencl):
    assert opencl.malloc(0, 0) == 0
    assert opencl.kpdrFree(0, None) == SUCCESS


def test_freeing_memory_with_a_copy_still_queued_is_safe(opencl):
    stream = opencl.stream(0)
    a = opencl.malloc(0, 8 * MIB)
    host = ctypes.create_string_buffer(8 * MIB)
    opencl.check(opencl.copy(a, host, 8 * MIB, HOST_TO_DEVICE, stream))
    opencl.check(opencl.kpdrFree(0, ctypes.c_void_p(a)))
    opencl.check(opencl.kpdrStreamSynchronize(stream))


def test_work_on_one_stream_runs_in_submission_order(opencl):
    stream = opencl.stream(0)
    a = opencl.malloc(0, 4096)
    first = opencl.upload(a, b"A" * 64, stream)
    opencl.check(opencl.copy(a + 64, a, 64, DEVICE_TO_DEVICE, stream))
    second = opencl.upload(a, b"B" * 64, stream)
    assert opencl.download(a, 128, stream) == b"B" * 64 + b"A" * 64
    del first, second


def test_stream_wait_event_orders_work_across_streams(opencl):
    producer, consumer = opencl.stream(0), opencl.stream(0)
    a, b = opencl.malloc(0, 16 * MIB), opencl.malloc(0, 16 * MIB)
    data = os.urandom(16 * MIB)
    keep = opencl.upload(a, data, producer)
    event = opencl.event(0)
    opencl.check(opencl.kpdrEventRecord(event, producer))
    opencl.check(opencl.kpdrStreamWaitEvent(consumer, event))
    opencl.check(opencl.copy(b, a, 16 * MIB, DEVICE_TO_DEVICE, consumer))
    assert opencl.download(b, 16 * MIB, consumer) == data
    del keep


def test_streams_and_events_report_completion(opencl):
    stream = opencl.stream(0)
    assert opencl.kpdrStreamQuery(stream) == SUCCESS
    never = opencl.event(0)
    assert opencl.kpdrEventQuery(never) == SUCCESS
    assert opencl.kpdrStreamWaitEvent(stream, never) == SUCCESS
    a = opencl.malloc(0, 4 * MIB)
    keep = opencl.upload(a, b"z" * (4 * MIB), stream)
    event = opencl.event(0)
    opencl.check(opencl.kpdrEventRecord(event, stream))
    opencl.check(opencl.kpdrEventSynchronize(event))
    assert opencl.kpdrEventQuery(event) == SUCCESS
    opencl.check(opencl.kpdrStreamSynchronize(stream))
    assert opencl.kpdrStreamQuery(stream) == SUCCESS
    del keep


def _poll(check, seconds=60.0):
    """Calls ``check()`` until it returns SUCCESS (or fails the test after ``seconds``)."""
    deadline = time.monotonic() + seconds
    while True:
        code = check()
        if code == SUCCESS:
            return
        assert code == ERROR_NOT_READY, code
        assert time.monotonic() < deadline, "the work never completed: was it ever flushed to the device?"
        time.sleep(0.001)


# Commands are enqueued without an event and flushed only now and then (queues.h): a
# few copies after the first sit unflushed. Polling, recording and waiting must still
# see them complete, in order, with no kpdrStreamSynchronize.


def test_polling_stream_query_sees_unflushed_work_complete(opencl):
    stream = opencl.stream(0)
    a, b, c = (opencl.malloc(0, 4 * MIB) for _ in range(3))
    data = os.urandom(4 * MIB)
    keep = opencl.upload(a, data, stream)
    for dst, src in ((b, a), (c, b), (a, c), (b, a)):
        opencl.check(opencl.copy(dst, src, 4 * MIB, DEVICE_TO_DEVICE, stream))
    _poll(lambda: opencl.kpdrStreamQuery(stream))
    assert opencl.kpdrStreamQuery(stream) == SUCCESS
    assert opencl.download(b, 4 * MIB, stream) == data
    del keep


def test_polling_an_event_recorded_after_unflushed_work_sees_it_complete(opencl):
    stream = opencl.stream(0)
    a, b = opencl.malloc(0, 4 * MIB), opencl.malloc(0, 4 * MIB)
    keep = opencl.upload(a, os.urandom(4 * MIB), stream)
    for _ in range(3):
        opencl.check(opencl.copy(b, a, 4 * MIB, DEVICE_TO_DEVICE, stream))
    event = opencl.event(0)
    opencl.check(opencl.kpdrEventRecord(event, stream))
    _poll(lambda: opencl.kpdrEventQuery(event))
    assert opencl.kpdrStreamQuery(stream) == SUCCESS  # the event covered everything submitted
    del keep


def test_stream_wait_event_orders_a_burst_of_unflushed_work_across_streams(opencl):
    # More commands than one flush interval, then a few more: the event must cover them all.
    producer, consumer = opencl.stream(0), opencl.stream(0)
    size = 4 * MIB
    a, b, c, d = (opencl.malloc(0, size) for _ in range(4))
    data = os.urandom(size)
    keep = [opencl.upload(b, bytes(size), producer), opencl.upload(a, data, producer)]
    for _ in range(10):  # a -> c -> a, 20 copies, leaving `data` in a and c
        opencl.check(opencl.copy(c, a, size, DEVICE_TO_DEVICE, producer))
        opencl.check(opencl.copy(a, c, size, DEVICE_TO_DEVICE, producer))
    opencl.check(opencl.copy(b, c, size, DEVICE_TO_DEVICE, producer))  # b holds `data` only at the end
    event = opencl.event(0, EVENT_DISABLE_TIMING)
    opencl.check(opencl.kpdrEventRecord(event, producer))
    opencl.check(opencl.kpdrStreamWaitEvent(consumer, event))
    opencl.check(opencl.copy(d, b, size, DEVICE_TO_DEVICE, consumer))
    assert opencl.download(d, size, consumer) == data
    opencl.check(opencl.kpdrStreamSynchronize(producer))
    del keep


def test_events_recorded_back_to_back_each_take_their_own_timestamp(opencl):
    stream = opencl.stream(0)
    first, second = opencl.event(0), opencl.event(0)
    opencl.check(opencl.kpdrEventRecord(first, stream))
    opencl.check(opencl.kpdrEventSynchronize(first))
    time.sleep(0.05)
    opencl.check(opencl.kpdrEventRecord(second, stream))  # nothing submitted in between
    opencl.check(opencl.kpdrEventSynchronize(second))
    code, ms = opencl.elapsed_ms(first, second)
    # As on an idle CUDA stream: the second recording completes when it is made, >= 50 ms
    # after the first (not when the work both captured completed).
    assert code == SUCCESS and ms >= 40.0



def timed_copies(runtime, size, copies):
    """(status, ms) of kpdrEventElapsedTime between events recorded around ``copies``
    device-to-device copies of ``size`` bytes on a new stream of device 0."""
    stream = runtime.stream(0)
    a, b = runtime.malloc(0, size), runtime.malloc(0, size)
    start, end = runtime.event(0), runtime.event(0)
    runtime.check(runtime.kpdrEventRecord(start, stream))
    for _ in range(copies):
        runtime.check(runtime.copy(b, a, size, DEVICE_TO_DEVICE, stream))
    runtime.check(runtime.kpdrEventRecord(end, stream))
    runtime.check(runtime.kpdrEventSynchronize(end))
    return runtime.elapsed_ms(start, end)


def test_elapsed_time_covers_the_work_between_two_events(opencl):
    code, ms = timed_copies(opencl, 64 * MIB, copies=4)
    assert code == SUCCESS and ms > 0.0


def test_elapsed_time_needs_timing_events_that_were_recorded(opencl):
    stream = opencl.stream(0)
    timed, untimed = opencl.event(0), opencl.event(0, EVENT_DISABLE_TIMING)
    assert opencl.elapsed_ms(timed, timed)[0] == ERROR_INVALID_VALUE  # never recorded
    opencl.check(opencl.kpdrEventRecord(timed, stream))
    opencl.check(opencl.kpdrEventRecord(untimed, stream))
    opencl.check(opencl.kpdrStreamSynchronize(stream))
    assert opencl.elapsed_ms(timed, untimed)[0] == ERROR_INVALID_VALUE
    assert "DISABLE_TIMING" in opencl.last_error_message()


def test_profiling_always_profiles_from_the_start_and_times_events(load_opencl):
    code, ms = timed_copies(load_opencl("profiling=always"), 16 * MIB, copies=1)
    assert code == SUCCESS and ms > 0.0


def test_an_unknown_profiling_option_is_refused_naming_the_choices(load_uninitialized_opencl):
    runtime = load_uninitialized_opencl()
    assert runtime.kpdrInit(b"profiling=sometimes") == ERROR_INVALID_VALUE
    message = runtime.last_error_message()
    assert "profiling" in message and "auto" in message and "always" in message


def test_destroyed_handles_are_invalid(opencl):
    stream, event = opencl.stream(0), opencl.event(0)
    opencl.check(opencl.kpdrStreamDestroy(stream))
    opencl.check(opencl.kpdrEventDestroy(event))
    assert opencl.kpdrStreamQuery(stream) == ERROR_INVALID_HANDLE
    assert opencl.kpdrEventQuery(event) == ERROR_INVALID_HANDLE


def test_out_of_range_device_is_invalid_device(opencl):
    count = opencl.device_count()
    ptr = ctypes.c_void_p()
    assert opencl.kpdrMalloc(count, ctypes.byref(ptr), 64) == ERROR_INVALID_DEVICE


def test_device_filter_matching_nothing_lists_the_devices_and_init_can_be_retried(
    load_uninitialized_opencl, tmp_path
):
    runtime = load_uninitialized_opencl()
    assert runtime.kpdrInit(b"platform=no-such-platform") == ERROR_INVALID_DEVICE
    message = runtime.last_error_message()
    assert "no OpenCL device matches platform='no-such-platform'" in message
    assert "The OpenCL devices here are" in message and "platform=" in message
    assert runtime.kpdrInit(f"cache_dir={tmp_path}".encode()) == SUCCESS


def test_names_and_device_count_options_describe_the_devices(load_opencl):
    runtime = load_opencl("device_count=1;names=Chip0")
    assert runtime.device_count() == 1 and runtime.properties(0).name == b"Chip0"


def test_more_devices_than_match_is_refused_with_the_fix(load_uninitialized_opencl):
    runtime = load_uninitialized_opencl()
    assert runtime.kpdrInit(b"device_count=127") == ERROR_INVALID_VALUE
    assert "ask for fewer" in runtime.last_error_message()


def test_absent_opencl_library_names_the_library_and_how_to_install_it(load_uninitialized_opencl):
    runtime = load_uninitialized_opencl()
    assert runtime.kpdrInit(b"library=/nonexistent/libOpenCL.so.1") != SUCCESS
    message = runtime.last_error_message()
    assert "cannot load the OpenCL ICD loader '/nonexistent/libOpenCL.so.1'" in message
    assert "apt-get install" in message


def test_no_platform_says_how_to_install_or_register_a_driver(opencl_library_path, tmp_path):
    # The ICD loader reads its vendor list once per process: a fresh process with an
    # empty vendor directory sees no platform.
    empty = tmp_path / "vendors"
    empty.mkdir()
    script = textwrap.dedent(f"""
        import sys
        sys.path.append({str(REPO_ROOT)!r})  # after an installed kernel_pytorch
        from kernel_pytorch.asic.conformance.kpdr_ctypes import KpdrLibrary
        runtime = KpdrLibrary({str(opencl_library_path)!r})
        print(runtime.kpdrInit(b""))
        print(runtime.last_error_message())
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCL_ICD", "MY_ASIC_OPENCL_"))}
    env["OCL_ICD_VENDORS"] = str(empty)
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    code, message = done.stdout.split("\n", 1)
    assert int(code) != SUCCESS
    assert "found no platform" in message and "OCL_ICD_FILENAMES" in message


def test_library_exports_exactly_the_kpdr_functions(opencl_library_path):
    from runtime_sources import header_function_names

    symbols = subprocess.run(["nm", "-D", "--defined-only", str(opencl_library_path)], capture_output=True,
                             text=True, check=True).stdout
    exported = {line.split()[-1] for line in symbols.splitlines() if " T " in line}
    assert exported == set(header_function_names()) | {"kpdrGetKernels"}


def test_a_forked_child_gets_not_initialized_instead_of_a_broken_driver(opencl_library_path, tmp_path):
    script = textwrap.dedent(f"""
        import os, sys, ctypes
        sys.path.append({str(REPO_ROOT)!r})  # after an installed kernel_pytorch
        from kernel_pytorch.asic.conformance.kpdr_ctypes import KpdrLibrary
        runtime = KpdrLibrary({str(opencl_library_path)!r})
        assert runtime.kpdrInit(b"cache_dir=off") == 0, runtime.last_error_message()
        pid = os.fork()
        if pid == 0:
            count = ctypes.c_int()
            code = runtime.kpdrGetDeviceCount(ctypes.byref(count))
            os._exit(0 if code == 5 and "forked child" in runtime.last_error_message() else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        count = ctypes.c_int()
        print(runtime.kpdrGetDeviceCount(ctypes.byref(count)))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MY_ASIC_OPENCL_")}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0"]  # the child was refused cleanly; the parent still works
