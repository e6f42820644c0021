"""ctypes bindings for the kpdr device-runtime C ABI (csrc/runtime/kpdr.h).

Loads any library implementing the ABI (the simulator ``libmyasic.so``, the tiny test
runtime, a chip team's own) and exposes the 25 functions with their exact C signatures,
plus a few helpers that keep the contract checks readable. Calls return the raw
``kpdrError_t`` so checks can assert on specific codes; :meth:`KpdrLibrary.check` turns
failures into :class:`KpdrError`. Used by the conformance kit's ABI section
(:mod:`kernel_pytorch.asic.conformance.abi`) and by tests/runtime.
"""

import ctypes

# kpdrError_t
SUCCESS = 0
ERROR_INVALID_VALUE = 1
ERROR_INVALID_DEVICE = 2
ERROR_OUT_OF_MEMORY = 3
ERROR_NOT_READY = 4
ERROR_NOT_INITIALIZED = 5
ERROR_ALREADY_INITIALIZED = 6
ERROR_INVALID_HANDLE = 7
ERROR_NOT_SUPPORTED = 8
ERROR_UNKNOWN = 999
ALL_ERROR_CODES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 999)
ERROR_NAMES = {
    0: "KPDR_SUCCESS",
    1: "KPDR_ERROR_INVALID_VALUE",
    2: "KPDR_ERROR_INVALID_DEVICE",
    3: "KPDR_ERROR_OUT_OF_MEMORY",
    4: "KPDR_ERROR_NOT_READY",
    5: "KPDR_ERROR_NOT_INITIALIZED",
    6: "KPDR_ERROR_ALREADY_INITIALIZED",
    7: "KPDR_ERROR_INVALID_HANDLE",
    8: "KPDR_ERROR_NOT_SUPPORTED",
    999: "KPDR_ERROR_UNKNOWN",
}

# KPDR_ABI_VERSION these bindings were written for.
ABI_VERSION = 1

# kpdrMemcpyKind
HOST_TO_DEVICE = 1
DEVICE_TO_HOST = 2
DEVICE_TO_DEVICE = 3

EVENT_DEFAULT = 0
EVENT_DISABLE_TIMING = 1

GIB = 1 << 30
MIB = 1 << 20


class DeviceProperties(ctypes.Structure):
    """Mirror of ``kpdrDeviceProperties``."""

    _fields_ = [
        ("name", ctypes.c_char * 256),
        ("total_memory", ctypes.c_uint64),
        ("compute_units", ctypes.c_int32),
        ("host_addressable", ctypes.c_int32),
        ("reserved", ctypes.c_int32 * 16),
    ]


_P = ctypes.c_void_p
_ERR = ctypes.c_int
_SIGNATURES = {
    "kpdrGetAbiVersion": (ctypes.c_uint32, []),
    "kpdrInit": (_ERR, [ctypes.c_char_p]),
    "kpdrGetErrorString": (ctypes.c_char_p, [_ERR]),
    "kpdrGetLastErrorMessage": (ctypes.c_char_p, []),
    "kpdrGetDeviceCount": (_ERR, [ctypes.POINTER(ctypes.c_int)]),
    "kpdrGetDeviceProperties": (_ERR, [ctypes.c_int, ctypes.POINTER(DeviceProperties)]),
    "kpdrDeviceSynchronize": (_ERR, [ctypes.c_int]),
    "kpdrMemGetInfo": (
        _ERR,
        [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)],
    ),
    "kpdrMalloc": (_ERR, [ctypes.c_int, ctypes.POINTER(_P), ctypes.c_size_t]),
    "kpdrFree": (_ERR, [ctypes.c_int, _P]),
    "kpdrMallocHost": (_ERR, [ctypes.POINTER(_P), ctypes.c_size_t]),
    "kpdrFreeHost": (_ERR, [_P]),
    "kpdrPointerGetDevice": (_ERR, [_P, ctypes.POINTER(ctypes.c_int)]),
    "kpdrMemcpyAsync": (_ERR, [_P, _P, ctypes.c_size_t, ctypes.c_int, _P]),
    "kpdrStreamCreate": (_ERR, [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_P)]),
    "kpdrStreamDestroy": (_ERR, [_P]),
    "kpdrStreamSynchronize": (_ERR, [_P]),
    "kpdrStreamQuery": (_ERR, [_P]),
    "kpdrStreamWaitEvent": (_ERR, [_P, _P]),
    "kpdrEventCreate": (_ERR, [ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_P)]),
    "kpdrEventDestroy": (_ERR, [_P]),
    "kpdrEventRecord": (_ERR, [_P, _P]),
    "kpdrEventQuery": (_ERR, [_P]),
    "kpdrEventSynchronize": (_ERR, [_P]),
    "kpdrEventElapsedTime": (_ERR, [ctypes.POINTER(ctypes.c_float), _P, _P]),
}


# The functions every runtime must export; kpdrGetKernels is optional (looked up with dlsym).
REQUIRED_FUNCTIONS = tuple(_SIGNATURES)
OPTIONAL_FUNCTIONS = ("kpdrGetKernels",)


def error_name(code):
    """``"KPDR_ERROR_OUT_OF_MEMORY"`` for 3, ``"code 42"`` for a code the ABI lacks."""
    return ERROR_NAMES.get(code, f"code {code}")


class KpdrError(RuntimeError):
    """A kpdr call failed; carries the code and the runtime's thread-local message."""

    def __init__(self, code, message):
        super().__init__(f"{error_name(code)}: {message}")
        self.code = code
        self.message = message


class KpdrLibrary:
    """One loaded copy of a kpdr runtime library (kpdrInit state is per copy)."""

    def __init__(self, path):
        self.path = str(path)
        self.lib = ctypes.CDLL(self.path)
        missing = [name for name in _SIGNATURES if not hasattr(self.lib, name)]
        if missing:
            raise AttributeError(f"{self.path} does not export {', '.join(missing)} (every kpdr runtime must)")
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(self.lib, name)
            function.restype = restype
            function.argtypes = argtypes

    def __getattr__(self, name):
        # Lets tests call the raw C functions: runtime.kpdrStreamQuery(stream).
        if name.startswith("kpdr"):
            return getattr(self.lib, name)
        raise AttributeError(name)

    def last_error_message(self):
        return self.lib.kpdrGetLastErrorMessage().decode()

    def check(self, code):
        """Raises KpdrError unless ``code`` is KPDR_SUCCESS."""
        if code != SUCCESS:
            raise KpdrError(code, self.last_error_message())

    def init(self, options=None):
        """kpdrInit(options); raises KpdrError on failure."""
        self.check(self.lib.kpdrInit(options.encode() if options is not None else None))
        return self

    def device_count(self):
        count = ctypes.c_int(-1)
        self.check(self.lib.kpdrGetDeviceCount(ctypes.byref(count)))
        return count.value

    def properties(self, device):
        props = DeviceProperties()
        self.check(self.lib.kpdrGetDeviceProperties(device, ctypes.byref(props)))
        return props

    def mem_info(self, device):
        """(free_bytes, total_bytes) of ``device``."""
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.check(self.lib.kpdrMemGetInfo(device, ctypes.byref(free), ctypes.byref(total)))
        return free.value, total.value

    def malloc(self, device, size):
        """Device allocation of ``size`` bytes; returns the address as an int (0 for NULL)."""
        ptr = ctypes.c_void_p()
        self.check(self.lib.kpdrMalloc(device, ctypes.byref(ptr), size))
        return ptr.value or 0

    def malloc_host(self, size):
        ptr = ctypes.c_void_p()
        self.check(self.lib.kpdrMallocHost(ctypes.byref(ptr), size))
        return ptr.value or 0

    def pointer_device(self, address):
        device = ctypes.c_int(-99)
        self.check(self.lib.kpdrPointerGetDevice(ctypes.c_void_p(address), ctypes.byref(device)))
        return device.value

    def stream(self, device, priority=0):
        handle = ctypes.c_void_p()
        self.check(self.lib.kpdrStreamCreate(device, priority, ctypes.byref(handle)))
        return handle

    def event(self, device, flags=EVENT_DEFAULT):
        handle = ctypes.c_void_p()
        self.check(self.lib.kpdrEventCreate(device, flags, ctypes.byref(handle)))
        return handle

    def copy(self, dst, src, size, kind, stream):
        """Raw kpdrMemcpyAsync; ``dst``/``src`` are ints or ctypes buffers."""
        return self.lib.kpdrMemcpyAsync(_address(dst), _address(src), size, kind, stream)

    def upload(self, device_address, data, stream):
        """Enqueues a host-to-device copy of ``data`` (bytes); returns the host buffer,
        which the caller keeps alive until the stream has finished."""
        host = ctypes.create_string_buffer(bytes(data), len(data))
        self.check(self.copy(device_address, host, len(data), HOST_TO_DEVICE, stream))
        return host

    def download(self, device_address, size, stream):
        """Copies ``size`` bytes to the host, synchronises ``stream`` and returns bytes."""
        host = ctypes.create_string_buffer(size)
        self.check(self.copy(host, device_address, size, DEVICE_TO_HOST, stream))
        self.check(self.lib.kpdrStreamSynchronize(stream))
        return host.raw

    def elapsed_ms(self, start, end):
        ms = ctypes.c_float(-1.0)
        code = self.lib.kpdrEventElapsedTime(ctypes.byref(ms), start, end)
        return code, ms.value


def _address(value):
    if isinstance(value, int):
        return ctypes.c_void_p(value)
    if value is None:
        return None
    return ctypes.cast(value, ctypes.c_void_p)
