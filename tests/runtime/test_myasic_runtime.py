"""Specification of the reference device runtime libmyasic.so (the simulated ASIC).

Every test talks to the library only through the kpdr C ABI (csrc/runtime/kpdr.h).
Asynchrony is made observable without timing races by the simulator's
``copy_bandwidth_gbps`` option: a throttled copy takes at least bytes / bandwidth, and its
bytes land only at the end, so work that fails to wait for it sees the old contents.
"""

import ctypes
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from kernel_pytorch.asic.conformance.kpdr_ctypes import (
    ALL_ERROR_CODES,
    ERROR_NAMES,
    DEVICE_TO_DEVICE,
    DEVICE_TO_HOST,
    ERROR_ALREADY_INITIALIZED,
    ERROR_INVALID_DEVICE,
    ERROR_INVALID_HANDLE,
    ERROR_INVALID_VALUE,
    ERROR_NOT_INITIALIZED,
    ERROR_NOT_READY,
    ERROR_OUT_OF_MEMORY,
    EVENT_DISABLE_TIMING,
    GIB,
    HOST_TO_DEVICE,
    MIB,
    SUCCESS,
    KpdrError,
)
from runtime_sources import header_function_names

# 10 MB/s simulated link: a 2 MB copy takes at least 0.2 s.
SLOW_LINK_OPTIONS = "copy_bandwidth_gbps=0.01"
SLOW_COPY_BYTES = 2_000_000
SLOW_COPY_SECONDS = SLOW_COPY_BYTES / 0.01e9


def pattern(size, seed):
    return bytes((i * 7 + seed) % 251 for i in range(size))


def resident_set_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def mapped_ranges():
    with open("/proc/self/maps") as maps:
        for line in maps:
            start, end = line.split()[0].split("-")
            yield int(start, 16), int(end, 16)


# --- configuration -----------------------------------------------------------


def test_defaults_are_two_host_addressable_devices_named_myasic(load_myasic):
    runtime = load_myasic()
    assert runtime.device_count() == 2
    for device in range(2):
        props = runtime.properties(device)
        assert props.name.decode() == f"MyASIC-{device}"
        assert props.compute_units == 64
        assert props.host_addressable == 1
        assert list(props.reserved) == [0] * 16


def host_ram_bytes():
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("device_count", [1, 2, 8])
def test_default_capacity_is_16_gib_at_most_and_the_devices_together_fit_the_host(load_myasic, device_count):
    runtime = load_myasic(options=f"device_count={device_count}")
    capacity = runtime.properties(0).total_memory
    assert all(runtime.properties(d).total_memory == capacity for d in range(device_count))
    assert MIB <= capacity <= 16 * GIB
    assert device_count * capacity <= host_ram_bytes()
    assert runtime.mem_info(0) == (capacity, capacity)


def run_limited(script, address_space_bytes, timeout_s=60):
    """Runs ``script`` (which can import kpdr_ctypes) under an address-space limit (ulimit -v)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))

    # The bindings load by file, without importing torch, which would not fit the limit.
    from kernel_pytorch.asic.conformance import kpdr_ctypes

    preamble = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('kpdr_ctypes', {kpdr_ctypes.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "sys.modules['kpdr_ctypes'] = module\n"
    )
    return subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=timeout_s, preexec_fn=limit)


def test_default_capacity_splits_a_smaller_memory_limit_over_the_devices(myasic_library_path):
    # 6 GiB of address space (ulimit -v) for 2 devices: 3 GiB each, a whole number of GiB.
    result = run_limited(f"""
        from kpdr_ctypes import KpdrLibrary
        runtime = KpdrLibrary({str(myasic_library_path)!r})
        runtime.check(runtime.kpdrInit(None))
        print(runtime.properties(0).total_memory, runtime.properties(1).total_memory)
    """, 6 * GIB)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(3 * GIB)] * 2


def test_capacity_beyond_the_host_is_refused_unless_overcommit_is_explicit(load_uninitialized_myasic):
    too_much_mb = host_ram_bytes() // MIB + 1024
    runtime = load_uninitialized_myasic()
    assert runtime.kpdrInit(f"device_count=1;memory_mb={too_much_mb}".encode()) == ERROR_INVALID_VALUE
    message = runtime.last_error_message()
    assert f"memory_mb='{too_much_mb}'" in message and "more than this host's" in message
    assert "physical RAM" in message or "limit" in message  # which limit binds
    assert "Lower memory_mb to at most" in message and "overcommit=1" in message
    assert runtime.kpdrInit(f"device_count=1;memory_mb={too_much_mb};overcommit=1".encode()) == SUCCESS
    assert runtime.properties(0).total_memory == too_much_mb * MIB


def test_devices_that_fit_together_are_accepted_without_overcommit(load_myasic):
    fitting_mb = host_ram_bytes() // MIB // 4
    runtime = load_myasic(options=f"device_count=4;memory_mb={fitting_mb}")
    assert runtime.properties(3).total_memory == fitting_mb * MIB


def test_overcommit_environment_variable_allows_capacity_beyond_the_host(load_myasic):
    too_much_mb = host_ram_bytes() // MIB + 1024
    runtime = load_myasic(env={"MY_ASIC_MEMORY_MB": str(too_much_mb), "MY_ASIC_OVERCOMMIT": "1",
                               "MY_ASIC_DEVICE_COUNT": "1"})
    assert runtime.properties(0).total_memory == too_much_mb * MIB


def test_host_running_out_is_reported_as_the_host_not_the_device(myasic_library_path):
    # The device has room (16 GiB free) but the host cannot map 2 GiB more (ulimit -v).
    result = run_limited(f"""
        import resource
        from kpdr_ctypes import KpdrLibrary, KpdrError, ERROR_OUT_OF_MEMORY, GIB
        runtime = KpdrLibrary({str(myasic_library_path)!r})
        runtime.check(runtime.kpdrInit(b"device_count=1;memory_mb=16384;overcommit=1"))
        with open("/proc/self/status") as status:
            used = next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (used + GIB, used + GIB))
        try:
            runtime.malloc(0, 2 * GIB)
        except KpdrError as error:
            print(error.code == ERROR_OUT_OF_MEMORY, runtime.mem_info(0)[0] == 16 * GIB)
            print(error.message)
    """, 64 * GIB)
    assert result.returncode == 0, result.stderr
    verdicts, message = result.stdout.split("\n", 1)
    assert verdicts == "True True"
    assert message.startswith("host out of memory") and "not the simulated device" in message
    assert "2.00 GiB" in message


def test_environment_variables_configure_the_devices(load_myasic):
    runtime = load_myasic(
        env={
            "MY_ASIC_DEVICE_COUNT": "3",
            "MY_ASIC_MEMORY_MB": "512",
            "MY_ASIC_DEVICE_NAMES": "Left,Middle,Right",
            "MY_ASIC_HOST_ADDRESSABLE": "0",
        }
    )
    assert runtime.device_count() == 3
    assert [runtime.properties(d).name.decode() for d in range(3)] == ["Left", "Middle", "Right"]
    assert runtime.properties(2).total_memory == 512 * MIB
    assert runtime.properties(0).host_addressable == 0


def test_an_old_variable_name_still_works_with_one_note_on_stderr(load_myasic, capfd):
    runtime = load_myasic(env={"MYASIC_DEVICE_COUNT": "3"})
    assert runtime.device_count() == 3
    err = capfd.readouterr().err
    assert err.count("environment variable MYASIC_DEVICE_COUNT is deprecated; set MY_ASIC_DEVICE_COUNT") == 1


def test_the_new_variable_name_wins_over_the_old_one(load_myasic, capfd):
    runtime = load_myasic(env={"MY_ASIC_DEVICE_COUNT": "4", "MYASIC_DEVICE_COUNT": "3"})
    assert runtime.device_count() == 4
    assert "deprecated" not in capfd.readouterr().err


def test_options_string_overrides_the_environment_key_by_key(load_myasic):
    runtime = load_myasic(
        options="device_count=4;memory_mb=32768;names=A,B,C,D;compute_units=128;overcommit=1",
        env={"MY_ASIC_DEVICE_COUNT": "3", "MY_ASIC_HOST_ADDRESSABLE": "0"},
    )
    assert runtime.device_count() == 4
    assert runtime.properties(3).name == b"D"
    assert runtime.properties(0).total_memory == 32 * GIB
    assert runtime.properties(0).compute_units == 128
    assert runtime.properties(0).host_addressable == 0  # from the environment


def test_unknown_option_keys_and_empty_pairs_are_ignored(load_myasic):
    runtime = load_myasic(options=";future_key=1;;device_count=1;")
    assert runtime.device_count() == 1


@pytest.mark.parametrize(
    ("options", "named_in_message"),
    [
        ("device_count=two", "device_count"),
        ("device_count=0", "device_count"),
        ("device_count=-1", "device_count"),
        ("memory_mb=16GB", "memory_mb"),
        ("host_addressable=yes", "host_addressable"),
        ("compute_units=0", "compute_units"),
        ("copy_bandwidth_gbps=fast", "copy_bandwidth_gbps"),
        ("overcommit=2", "overcommit"),
        ("device_count=2;names=OnlyOne", "names"),
        ("names=,Empty", "names"),
        ("device_count", "key=value"),
    ],
)
def test_invalid_options_fail_init_naming_the_problem(
    load_uninitialized_myasic, options, named_in_message
):
    runtime = load_uninitialized_myasic()
    assert runtime.kpdrInit(options.encode()) == ERROR_INVALID_VALUE
    assert named_in_message in runtime.last_error_message()


def test_invalid_environment_variable_is_named_in_the_error(
    load_uninitialized_myasic, clean_myasic_environment
):
    clean_myasic_environment.setenv("MY_ASIC_MEMORY_MB", "lots")
    runtime = load_uninitialized_myasic()
    assert runtime.kpdrInit(None) == ERROR_INVALID_VALUE
    assert "MY_ASIC_MEMORY_MB" in runtime.last_error_message()


def test_names_count_mismatch_message_says_how_to_fix_it(load_uninitialized_myasic):
    runtime = load_uninitialized_myasic()
    assert runtime.kpdrInit(b"device_count=3;names=A,B") == ERROR_INVALID_VALUE
    message = runtime.last_error_message()
    assert "2 names" in message and "device_count is 3" in message


def test_failed_init_leaves_runtime_uninitialised_and_retry_succeeds(load_uninitialized_myasic):
    runtime = load_uninitialized_myasic()
    assert runtime.kpdrInit(b"device_count=0") == ERROR_INVALID_VALUE
    assert runtime.kpdrGetDeviceCount(ctypes.byref(ctypes.c_int())) == ERROR_NOT_INITIALIZED
    assert runtime.kpdrInit(b"device_count=1") == SUCCESS
    assert runtime.device_count() == 1


def test_second_init_is_rejected_and_keeps_the_first_config(load_myasic):
    runtime = load_myasic(options="device_count=1")
    assert runtime.kpdrInit(b"device_count=5") == ERROR_ALREADY_INITIALIZED
    assert runtime.device_count() == 1


def test_calls_before_init_return_not_initialized(load_uninitialized_myasic):
    runtime = load_uninitialized_myasic()
    assert runtime.kpdrGetAbiVersion() == 1
    assert runtime.kpdrGetDeviceCount(ctypes.byref(ctypes.c_int())) == ERROR_NOT_INITIALIZED
    assert runtime.kpdrMalloc(0, ctypes.byref(ctypes.c_void_p()), 64) == ERROR_NOT_INITIALIZED
    assert "kpdrInit" in runtime.last_error_message()


def test_out_of_range_device_is_invalid_device(myasic):
    assert myasic.kpdrDeviceSynchronize(2) == ERROR_INVALID_DEVICE
    assert "0..1" in myasic.last_error_message()


# --- errors ------------------------------------------------------------------


def test_every_error_code_has_a_distinct_description_starting_with_its_name(myasic):
    strings = [myasic.kpdrGetErrorString(code).decode() for code in ALL_ERROR_CODES]
    assert len(set(strings)) == len(strings)
    for code, text in zip(ALL_ERROR_CODES, strings):
        assert text.startswith(ERROR_NAMES[code] + ": ")


def test_last_error_message_is_per_thread(myasic):
    assert myasic.kpdrFree(0, ctypes.c_void_p(0x1234)) == ERROR_INVALID_HANDLE
    main_thread_message = myasic.last_error_message()

    def fail_differently():
        myasic.kpdrDeviceSynchronize(7)

    worker = threading.Thread(target=fail_differently)
    worker.start()
    worker.join()
    assert myasic.last_error_message() == main_thread_message


# --- memory ------------------------------------------------------------------


def test_allocation_beyond_capacity_is_out_of_memory_with_sizes_in_message(myasic):
    with pytest.raises(KpdrError) as failure:
        myasic.malloc(0, 20 * GIB)
    assert failure.value.code == ERROR_OUT_OF_MEMORY
    assert "requested 20.00 GiB" in failure.value.message
    assert "16.00 GiB of 16.00 GiB free" in failure.value.message
    assert "device 0" in failure.value.message


def test_out_of_memory_counts_existing_allocations_and_device_stays_usable(myasic):
    big = myasic.malloc(0, 10 * GIB)
    with pytest.raises(KpdrError) as failure:
        myasic.malloc(0, 8 * GIB)
    assert failure.value.code == ERROR_OUT_OF_MEMORY
    assert "only 6.00 GiB of 16.00 GiB free" in failure.value.message
    assert "(6442450944 bytes free)" in failure.value.message
    small = myasic.malloc(0, MIB)
    assert small != 0
    myasic.check(myasic.kpdrFree(0, small))
    myasic.check(myasic.kpdrFree(0, big))
    assert myasic.mem_info(0) == (16 * GIB, 16 * GIB)


def test_large_allocations_do_not_commit_host_memory_until_touched(myasic):
    before = resident_set_bytes()
    allocations = [myasic.malloc(device, 15 * GIB) for device in range(2)]
    assert resident_set_bytes() - before < 256 * MIB
    for device, address in enumerate(allocations):
        myasic.check(myasic.kpdrFree(device, address))


def test_mem_info_accounts_in_64_byte_granules_per_device(myasic):
    assert myasic.mem_info(1) == (16 * GIB, 16 * GIB)
    first = myasic.malloc(1, 1000)  # charged as 1024
    second = myasic.malloc(1, 1)  # charged as 64
    assert myasic.mem_info(1) == (16 * GIB - 1088, 16 * GIB)
    assert myasic.mem_info(0) == (16 * GIB, 16 * GIB)
    myasic.check(myasic.kpdrFree(1, first))
    assert myasic.mem_info(1) == (16 * GIB - 64, 16 * GIB)
    myasic.check(myasic.kpdrFree(1, second))
    assert myasic.mem_info(1) == (16 * GIB, 16 * GIB)


@pytest.mark.parametrize("size", [1, 100, 4096, 1 << 20])
def test_allocations_are_64_byte_aligned(myasic, size):
    assert myasic.malloc(0, size) % 64 == 0
    assert myasic.malloc_host(size) % 64 == 0


def test_zero_byte_allocation_returns_null_and_freeing_null_succeeds(myasic):
    assert myasic.malloc(0, 0) == 0
    assert myasic.mem_info(0)[0] == 16 * GIB
    assert myasic.kpdrFree(0, None) == SUCCESS
    assert myasic.malloc_host(0) == 0
    assert myasic.kpdrFreeHost(None) == SUCCESS


def test_freeing_unknown_or_already_freed_pointer_is_invalid_handle(myasic):
    assert myasic.kpdrFree(0, ctypes.c_void_p(0xDEAD0000)) == ERROR_INVALID_HANDLE
    address = myasic.malloc(0, 256)
    myasic.check(myasic.kpdrFree(0, address))
    assert myasic.kpdrFree(0, ctypes.c_void_p(address)) == ERROR_INVALID_HANDLE
    assert myasic.kpdrFreeHost(ctypes.c_void_p(0xDEAD0000)) == ERROR_INVALID_HANDLE


def test_freeing_interior_pointer_or_on_wrong_device_is_invalid_value(myasic):
    address = myasic.malloc(1, 256)
    assert myasic.kpdrFree(1, ctypes.c_void_p(address + 64)) == ERROR_INVALID_VALUE
    assert "inside an allocation" in myasic.last_error_message()
    assert myasic.kpdrFree(0, ctypes.c_void_p(address)) == ERROR_INVALID_VALUE
    assert "device 1" in myasic.last_error_message()
    assert myasic.kpdrFree(1, ctypes.c_void_p(address)) == SUCCESS


def test_pointer_lookup_finds_owner_of_any_interior_address(myasic):
    first = myasic.malloc(0, 4096)
    second = myasic.malloc(1, 4096)
    assert myasic.pointer_device(first) == 0
    assert myasic.pointer_device(first + 4095) == 0
    assert myasic.pointer_device(second + 100) == 1
    pinned = myasic.malloc_host(128)
    assert myasic.pointer_device(pinned + 127) == -1
    with pytest.raises(KpdrError) as failure:
        myasic.pointer_device(first + 4096 + (1 << 40))
    assert failure.value.code == ERROR_INVALID_HANDLE


def test_host_addressable_device_memory_is_real_host_memory(myasic):
    stream = myasic.stream(0)
    address = myasic.malloc(0, 64)
    ctypes.memmove(address, b"written by the host".ljust(64, b"."), 64)
    assert myasic.download(address, 19, stream) == b"written by the host"


def test_disguised_device_pointers_are_not_host_addresses_but_copies_work(load_myasic):
    runtime = load_myasic(options="host_addressable=0")
    assert runtime.properties(0).host_addressable == 0
    addresses = [runtime.malloc(0, 4096), runtime.malloc(1, 1 << 20)]
    for address in addresses:
        assert address >= 2**47  # beyond the 47-bit user address space
        assert not any(start <= address < end for start, end in mapped_ranges())
    stream = runtime.stream(1)
    data = pattern(1 << 20, seed=3)
    host = runtime.upload(addresses[1], data, stream)
    assert runtime.download(addresses[1], len(data), stream) == data
    assert runtime.pointer_device(addresses[1] + 12345) == 1
    del host


# --- copies --------------------------------------------------------------------


def test_host_to_device_to_host_round_trip(myasic):
    stream = myasic.stream(0)
    address = myasic.malloc(0, 3 * MIB)
    data = pattern(3 * MIB, seed=1)
    host = myasic.upload(address, data, stream)
    assert myasic.download(address, len(data), stream) == data
    del host


def test_device_to_device_copy_on_one_device(myasic):
    stream = myasic.stream(0)
    source, destination = myasic.malloc(0, 4096), myasic.malloc(0, 4096)
    host = myasic.upload(source, pattern(4096, seed=5), stream)
    myasic.check(myasic.copy(destination, source, 4096, DEVICE_TO_DEVICE, stream))
    assert myasic.download(destination, 4096, stream) == pattern(4096, seed=5)
    del host


@pytest.mark.parametrize("stream_device", [0, 1])
def test_device_to_device_copy_across_devices_on_either_devices_stream(myasic, stream_device):
    upload_stream = myasic.stream(0)
    copy_stream = myasic.stream(stream_device)
    download_stream = myasic.stream(1)
    source, destination = myasic.malloc(0, 8192), myasic.malloc(1, 8192)
    host = myasic.upload(source, pattern(8192, seed=9), upload_stream)
    myasic.check(myasic.kpdrStreamSynchronize(upload_stream))
    myasic.check(myasic.copy(destination, source, 8192, DEVICE_TO_DEVICE, copy_stream))
    myasic.check(myasic.kpdrStreamSynchronize(copy_stream))
    assert myasic.download(destination, 8192, download_stream) == pattern(8192, seed=9)
    del host


def test_work_on_one_stream_runs_in_submission_order(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    stream = runtime.stream(0)
    address = runtime.malloc(0, 4096)
    # The first copy is slow; a stream that let the second overtake it would end
    # with the first copy's contents.
    slow = runtime.upload(address, pattern(4096, seed=1) * 0 + bytes(4096), stream)
    big = runtime.malloc(0, SLOW_COPY_BYTES)
    big_host = runtime.upload(big, bytes(SLOW_COPY_BYTES), stream)
    last = runtime.upload(address, pattern(4096, seed=2), stream)
    assert runtime.download(address, 4096, stream) == pattern(4096, seed=2)
    del slow, big_host, last


def test_copy_partly_outside_an_allocation_is_rejected(myasic):
    stream = myasic.stream(0)
    address = myasic.malloc(0, 1024)
    host = ctypes.create_string_buffer(1024)
    assert myasic.copy(address + 512, host, 1024, HOST_TO_DEVICE, stream) == ERROR_INVALID_VALUE
    assert "overruns" in myasic.last_error_message()
    assert myasic.copy(host, address + 1, 1024, DEVICE_TO_HOST, stream) == ERROR_INVALID_VALUE


def test_copy_kind_must_match_where_the_pointers_live(myasic):
    stream = myasic.stream(0)
    device_a, device_b = myasic.malloc(0, 64), myasic.malloc(0, 64)
    host, other_host = ctypes.create_string_buffer(64), ctypes.create_string_buffer(64)
    assert myasic.copy(host, other_host, 64, HOST_TO_DEVICE, stream) == ERROR_INVALID_VALUE
    assert "not inside any live device allocation" in myasic.last_error_message()
    assert myasic.copy(device_a, device_b, 64, HOST_TO_DEVICE, stream) == ERROR_INVALID_VALUE
    assert "use DEVICE_TO_DEVICE" in myasic.last_error_message()
    assert myasic.copy(device_a, host, 64, DEVICE_TO_DEVICE, stream) == ERROR_INVALID_VALUE
    assert myasic.copy(device_a, device_b, 64, 42, stream) == ERROR_INVALID_VALUE
    assert "kind=42" in myasic.last_error_message()


def test_copy_must_be_enqueued_on_a_stream_of_a_participating_device(load_myasic):
    runtime = load_myasic(options="device_count=3")
    address = runtime.malloc(0, 64)
    other = runtime.malloc(1, 64)
    host = ctypes.create_string_buffer(64)
    stream_of_1, stream_of_2 = runtime.stream(1), runtime.stream(2)
    assert runtime.copy(address, host, 64, HOST_TO_DEVICE, stream_of_1) == ERROR_INVALID_VALUE
    assert "stream belongs to device 1" in runtime.last_error_message()
    assert runtime.copy(other, address, 64, DEVICE_TO_DEVICE, stream_of_2) == ERROR_INVALID_VALUE


def test_copy_on_null_or_destroyed_stream_is_rejected(myasic):
    address = myasic.malloc(0, 64)
    host = ctypes.create_string_buffer(64)
    assert myasic.copy(address, host, 64, HOST_TO_DEVICE, None) == ERROR_INVALID_VALUE
    stream = myasic.stream(0)
    myasic.check(myasic.kpdrStreamDestroy(stream))
    assert myasic.copy(address, host, 64, HOST_TO_DEVICE, stream) == ERROR_INVALID_HANDLE
    assert myasic.kpdrStreamDestroy(stream) == ERROR_INVALID_HANDLE


def test_freeing_memory_with_a_copy_still_queued_is_safe(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    stream = runtime.stream(0)
    address = runtime.malloc(0, SLOW_COPY_BYTES)
    host = runtime.upload(address, bytes(SLOW_COPY_BYTES), stream)
    runtime.check(runtime.kpdrFree(0, address))
    free, total = runtime.mem_info(0)
    assert free == total  # capacity returns at once
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    del host


# --- streams ---------------------------------------------------------------------


def test_empty_stream_is_ready(myasic):
    stream = myasic.stream(0, priority=-1)
    assert myasic.kpdrStreamQuery(stream) == SUCCESS
    assert myasic.kpdrStreamSynchronize(stream) == SUCCESS


def test_stream_query_is_not_ready_while_a_copy_is_pending(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    stream = runtime.stream(0)
    address = runtime.malloc(0, SLOW_COPY_BYTES)
    started = time.monotonic()
    host = runtime.upload(address, bytes(SLOW_COPY_BYTES), stream)
    state = runtime.kpdrStreamQuery(stream)
    # Only a test thread stalled for the whole simulated transfer may see it finished.
    assert state == ERROR_NOT_READY or time.monotonic() - started >= SLOW_COPY_SECONDS
    runtime.check(runtime.kpdrStreamSynchronize(stream))
    assert runtime.kpdrStreamQuery(stream) == SUCCESS
    del host


def test_stream_waiting_on_another_streams_event_is_not_ready_until_it_completes(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    busy, waiting = runtime.stream(0), runtime.stream(0)
    event = runtime.event(0)
    address = runtime.malloc(0, SLOW_COPY_BYTES)
    started = time.monotonic()
    host = runtime.upload(address, bytes(SLOW_COPY_BYTES), busy)
    runtime.check(runtime.kpdrEventRecord(event, busy))
    runtime.check(runtime.kpdrStreamWaitEvent(waiting, event))
    state = runtime.kpdrStreamQuery(waiting)
    assert state == ERROR_NOT_READY or time.monotonic() - started >= SLOW_COPY_SECONDS
    runtime.check(runtime.kpdrStreamSynchronize(waiting))
    assert runtime.kpdrEventQuery(event) == SUCCESS
    assert runtime.kpdrStreamQuery(busy) == SUCCESS
    del host


@pytest.mark.parametrize("waiting_device", [0, 1])
def test_stream_wait_event_orders_work_across_streams_and_devices(load_myasic, waiting_device):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    producer, consumer = runtime.stream(0), runtime.stream(waiting_device)
    produced = runtime.malloc(0, SLOW_COPY_BYTES)
    consumed = runtime.malloc(waiting_device, SLOW_COPY_BYTES)
    data = pattern(SLOW_COPY_BYTES, seed=4)
    ready = runtime.event(0)
    host = runtime.upload(produced, data, producer)
    runtime.check(runtime.kpdrEventRecord(ready, producer))
    runtime.check(runtime.kpdrStreamWaitEvent(consumer, ready))
    runtime.check(runtime.copy(consumed, produced, SLOW_COPY_BYTES, DEVICE_TO_DEVICE, consumer))
    # Without the wait the consumer would copy the not-yet-arrived (zero) bytes.
    assert runtime.download(consumed, SLOW_COPY_BYTES, consumer) == data
    del host


def test_waiting_on_a_never_recorded_event_does_not_block(myasic):
    stream, event = myasic.stream(0), myasic.event(1)
    myasic.check(myasic.kpdrStreamWaitEvent(stream, event))
    assert myasic.kpdrStreamQuery(stream) == SUCCESS


def test_device_synchronize_waits_for_every_stream_of_the_device(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    streams = [runtime.stream(0), runtime.stream(0)]
    addresses = [runtime.malloc(0, SLOW_COPY_BYTES) for _ in streams]
    hosts = [runtime.upload(a, bytes(SLOW_COPY_BYTES), s) for a, s in zip(addresses, streams)]
    runtime.check(runtime.kpdrDeviceSynchronize(0))
    assert [runtime.kpdrStreamQuery(s) for s in streams] == [SUCCESS, SUCCESS]
    del hosts


def test_destroying_a_stream_first_finishes_its_pending_work(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    stream = runtime.stream(0)
    address = runtime.malloc(0, SLOW_COPY_BYTES)
    data = pattern(SLOW_COPY_BYTES, seed=6)
    source = runtime.upload(address, data, stream)
    destination = ctypes.create_string_buffer(SLOW_COPY_BYTES)
    runtime.check(runtime.copy(destination, address, SLOW_COPY_BYTES, DEVICE_TO_HOST, stream))
    runtime.check(runtime.kpdrStreamDestroy(stream))
    assert destination.raw == data
    del source


# --- events -----------------------------------------------------------------------


def test_never_recorded_event_is_complete(myasic):
    event = myasic.event(0)
    assert myasic.kpdrEventQuery(event) == SUCCESS
    assert myasic.kpdrEventSynchronize(event) == SUCCESS


def test_elapsed_time_covers_the_work_between_two_events(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    stream = runtime.stream(0)
    start, end = runtime.event(0), runtime.event(0)
    address = runtime.malloc(0, SLOW_COPY_BYTES)
    runtime.check(runtime.kpdrEventRecord(start, stream))
    host = runtime.upload(address, bytes(SLOW_COPY_BYTES), stream)
    runtime.check(runtime.kpdrEventRecord(end, stream))
    runtime.check(runtime.kpdrEventSynchronize(end))
    code, elapsed = runtime.elapsed_ms(start, end)
    assert code == SUCCESS
    assert elapsed >= SLOW_COPY_SECONDS * 1000 * 0.999
    del host


def test_elapsed_time_between_back_to_back_events_is_non_negative(myasic):
    stream = myasic.stream(1)
    start, end = myasic.event(1), myasic.event(1)
    myasic.check(myasic.kpdrEventRecord(start, stream))
    myasic.check(myasic.kpdrEventRecord(end, stream))
    myasic.check(myasic.kpdrEventSynchronize(end))
    code, elapsed = myasic.elapsed_ms(start, end)
    assert code == SUCCESS and elapsed >= 0.0


def test_elapsed_time_is_not_ready_before_the_end_event_completes(load_myasic):
    runtime = load_myasic(options=SLOW_LINK_OPTIONS)
    stream = runtime.stream(0)
    start, end = runtime.event(0), runtime.event(0)
    address = runtime.malloc(0, SLOW_COPY_BYTES)
    runtime.check(runtime.kpdrEventRecord(start, stream))
    started = time.monotonic()
    host = runtime.upload(address, bytes(SLOW_COPY_BYTES), stream)
    runtime.check(runtime.kpdrEventRecord(end, stream))
    code, _ = runtime.elapsed_ms(start, end)
    assert code == ERROR_NOT_READY or time.monotonic() - started >= SLOW_COPY_SECONDS
    runtime.check(runtime.kpdrEventSynchronize(end))
    assert runtime.elapsed_ms(start, end)[0] == SUCCESS
    del host


def test_elapsed_time_with_a_timing_disabled_event_is_invalid_value(myasic):
    stream = myasic.stream(0)
    timed, untimed = myasic.event(0), myasic.event(0, EVENT_DISABLE_TIMING)
    for event in (timed, untimed):
        myasic.check(myasic.kpdrEventRecord(event, stream))
    assert myasic.elapsed_ms(timed, untimed)[0] == ERROR_INVALID_VALUE
    assert "DISABLE_TIMING" in myasic.last_error_message()


def test_elapsed_time_of_a_never_recorded_event_is_invalid_value(myasic):
    stream = myasic.stream(0)
    recorded, unrecorded = myasic.event(0), myasic.event(0)
    myasic.check(myasic.kpdrEventRecord(recorded, stream))
    assert myasic.elapsed_ms(recorded, unrecorded)[0] == ERROR_INVALID_VALUE


def test_event_must_be_recorded_on_a_stream_of_its_device(myasic):
    assert myasic.kpdrEventRecord(myasic.event(0), myasic.stream(1)) == ERROR_INVALID_VALUE
    assert "device 0" in myasic.last_error_message()


def test_destroyed_event_handle_is_invalid(myasic):
    event = myasic.event(0)
    myasic.check(myasic.kpdrEventDestroy(event))
    assert myasic.kpdrEventQuery(event) == ERROR_INVALID_HANDLE
    assert myasic.kpdrEventCreate(0, 8, ctypes.byref(ctypes.c_void_p())) == ERROR_INVALID_VALUE


# --- process lifecycle -------------------------------------------------------------


def run_python(script, timeout_s=60):
    """Runs ``script`` in a fresh interpreter (the ctypes bindings import from the package)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=Path(__file__).parent,  # not the repository root (GUIDE: no source tree first on sys.path)
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def test_process_exit_with_queued_slow_copies_neither_hangs_nor_crashes(myasic_library_path):
    # 1 MB/s link and 100 MB of device-to-device copies queued (device memory stays valid
    # until exit, as the ABI requires of copy operands): exit must not wait out 100 s.
    result = run_python(f"""
        from kernel_pytorch.asic.conformance.kpdr_ctypes import KpdrLibrary, DEVICE_TO_DEVICE, MIB
        runtime = KpdrLibrary({str(myasic_library_path)!r})
        runtime.check(runtime.kpdrInit(b"copy_bandwidth_gbps=0.001"))
        stream = runtime.stream(0)
        source, destination = runtime.malloc(0, MIB), runtime.malloc(1, MIB)
        for _ in range(100):
            runtime.check(runtime.copy(destination, source, MIB, DEVICE_TO_DEVICE, stream))
        print("queued", flush=True)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "queued"


def test_forked_child_cannot_use_the_runtime_and_exits_cleanly(myasic_library_path):
    result = run_python(f"""
        import ctypes, os
        from kernel_pytorch.asic.conformance.kpdr_ctypes import KpdrLibrary, ERROR_NOT_INITIALIZED, MIB
        runtime = KpdrLibrary({str(myasic_library_path)!r})
        runtime.check(runtime.kpdrInit(b"copy_bandwidth_gbps=0.01"))
        stream = runtime.stream(0)
        address = runtime.malloc(0, MIB)
        keep = runtime.upload(address, bytes(MIB), stream)  # worker busy at fork time
        pid = os.fork()
        if pid == 0:
            code = runtime.kpdrGetDeviceCount(ctypes.byref(ctypes.c_int()))
            if code != ERROR_NOT_INITIALIZED or "forked" not in runtime.last_error_message():
                os._exit(1)
            raise SystemExit(0)  # normal interpreter exit runs the library's destructors
        _, status = os.waitpid(pid, 0)
        runtime.check(runtime.kpdrStreamSynchronize(stream))
        print("child", os.waitstatus_to_exitcode(status), flush=True)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0"


# --- ABI surface ---------------------------------------------------------------------


def test_header_declares_the_25_functions_of_the_abi_and_the_optional_kernel_table():
    names = header_function_names()
    assert len(names) == 26 == len(set(names))
    assert "kpdrGetKernels" in names  # optional: looked up with dlsym


def test_library_exports_exactly_the_kpdr_functions(myasic_library_path):
    nm = subprocess.run(
        ["nm", "-D", "--defined-only", str(myasic_library_path)], capture_output=True, text=True
    )
    if nm.returncode != 0:
        pytest.skip(f"nm is unavailable: {nm.stderr.strip()}")
    exported_functions = re.findall(r"^\w+ T (\S+)$", nm.stdout, flags=re.MULTILINE)
    assert sorted(exported_functions) == sorted(header_function_names())
