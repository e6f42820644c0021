"""The tiny C runtime (tests/runtime/tiny_runtime) implements the whole kpdr ABI.

It exists to prove that kpdr.h is the only contract between kernel_pytorch and a chip
runtime; these tests check that it builds from the header alone, exports every ABI
function and behaves as its documentation says.
"""

import ctypes
import shutil
import subprocess

import pytest

from kernel_pytorch.asic.conformance.kpdr_ctypes import (
    ERROR_ALREADY_INITIALIZED,
    ERROR_INVALID_DEVICE,
    ERROR_INVALID_HANDLE,
    ERROR_INVALID_VALUE,
    ERROR_OUT_OF_MEMORY,
    GIB,
    SUCCESS,
    KpdrError,
    KpdrLibrary,
)
from runtime_sources import RUNTIME_INCLUDE_DIR, TINY_RUNTIME_SOURCE, header_function_names


@pytest.fixture(scope="module")
def tiny_library_path(tmp_path_factory):
    compiler = shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (cc) to build the tiny runtime")
    output = tmp_path_factory.mktemp("tiny") / "libtinychip.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-I", str(RUNTIME_INCLUDE_DIR), str(TINY_RUNTIME_SOURCE),
         "-o", str(output)],
        check=True,
    )  # fmt: skip
    return output


@pytest.fixture(scope="module")
def tiny(tiny_library_path):
    runtime = KpdrLibrary(tiny_library_path)
    runtime.check(runtime.kpdrInit(None))
    return runtime


def test_tiny_runtime_exports_every_abi_function(tiny_library_path):
    library = ctypes.CDLL(str(tiny_library_path))
    missing = [name for name in header_function_names() if not hasattr(library, name)]
    assert missing == []


def test_tiny_runtime_has_three_one_gib_tinychips(tiny):
    assert tiny.device_count() == 3
    assert [tiny.properties(d).name for d in range(3)] == [b"TinyChip-0", b"TinyChip-1", b"TinyChip-2"]
    assert tiny.properties(2).total_memory == GIB
    assert tiny.properties(0).host_addressable == 1
    assert tiny.kpdrDeviceSynchronize(3) == ERROR_INVALID_DEVICE


def test_tiny_runtime_rejects_second_init(tiny):
    assert tiny.kpdrInit(None) == ERROR_ALREADY_INITIALIZED


def test_tiny_runtime_copies_round_trip_across_devices(tiny):
    stream = tiny.stream(0)
    first, second = tiny.malloc(0, 4096), tiny.malloc(1, 4096)
    data = bytes(range(256)) * 16
    host = tiny.upload(first, data, stream)
    tiny.check(tiny.copy(second, first, 4096, 3, stream))  # either device's stream may copy across
    assert tiny.download(second, 4096, tiny.stream(1)) == data  # a download runs on its device's stream
    assert tiny.pointer_device(second + 4095) == 1
    for device, address in ((0, first), (1, second)):
        tiny.check(tiny.kpdrFree(device, address))
    del host


def test_tiny_runtime_enforces_capacity_and_tracks_memory(tiny):
    with pytest.raises(KpdrError) as failure:
        tiny.malloc(2, 2 * GIB)
    assert failure.value.code == ERROR_OUT_OF_MEMORY
    address = tiny.malloc(2, 1000)
    assert tiny.mem_info(2) == (GIB - 1000, GIB)
    tiny.check(tiny.kpdrFree(2, address))
    assert tiny.kpdrFree(2, ctypes.c_void_p(address)) == ERROR_INVALID_HANDLE
    pinned = tiny.malloc_host(64)
    assert tiny.pointer_device(pinned) == -1
    tiny.check(tiny.kpdrFreeHost(pinned))


def test_tiny_runtime_rejects_a_copy_on_a_stream_of_an_uninvolved_device(tiny):
    on_one, host = tiny.malloc(1, 64), ctypes.create_string_buffer(64)
    assert tiny.copy(on_one, host, 64, 1, tiny.stream(0)) == ERROR_INVALID_VALUE
    assert "does not touch" in tiny.last_error_message()


def test_tiny_runtime_destroyed_handles_are_errors_not_use_after_free(tiny):
    stream, event = tiny.stream(0), tiny.event(0)
    tiny.check(tiny.kpdrStreamDestroy(stream))
    tiny.check(tiny.kpdrEventDestroy(event))
    assert tiny.kpdrStreamQuery(stream) == ERROR_INVALID_HANDLE
    assert tiny.kpdrEventQuery(event) == ERROR_INVALID_HANDLE
    assert tiny.kpdrStreamDestroy(stream) == ERROR_INVALID_HANDLE


def test_tiny_runtime_events_complete_when_recorded(tiny):
    stream = tiny.stream(1)
    start, end = tiny.event(1), tiny.event(1)
    for event in (start, end):
        tiny.check(tiny.kpdrEventRecord(event, stream))
    assert tiny.kpdrEventQuery(end) == SUCCESS
    code, elapsed = tiny.elapsed_ms(start, end)
    assert code == SUCCESS and elapsed >= 0.0
