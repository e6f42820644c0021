"""The kernel table's ``random`` entry (kpdr.h: Philox4x32-10 per element) through ctypes.

:func:`check_entries` runs the checks every runtime's tests share: the values numpy's
reference of the documented algorithm gives for a seed, any strides, every distribution and
dtype, and the error codes.
"""

import ctypes

import numpy as np

from kpdr_gemm import table_entry
from kpdr_pointwise import INVALID_VALUE, NOT_SUPPORTED, Session, Strides

DTYPE_FLOAT32, DTYPE_BFLOAT16, DTYPE_BOOL, DTYPE_INT64, DTYPE_INT32 = 0, 2, 3, 4, 5
UNIFORM, NORMAL, BERNOULLI, EXPONENTIAL, INTEGER = 0, 1, 2, 3, 4


class RandomArgs(ctypes.Structure):
    _fields_ = [
        ("ndim", ctypes.c_int32), ("sizes", Strides), ("dtype", ctypes.c_int),
        ("out", ctypes.c_void_p), ("out_strides", Strides),
        ("distribution", ctypes.c_int32), ("a", ctypes.c_double), ("b", ctypes.c_double),
        ("low", ctypes.c_int64), ("high", ctypes.c_int64), ("seed", ctypes.c_uint64),
    ]  # fmt: skip


from kpdr_indexing import KernelTable as _EarlierTable  # kpdr.h's order: the entries before random


class KernelTable(_EarlierTable):
    _fields_ = [("random", ctypes.c_void_p)]


def entry(runtime):
    """The runtime's random entry (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, "random", RandomArgs)


def philox(counters, seed):
    """Philox4x32-10 (Random123's constants) of counters (uint64 array) under a 64-bit key:
    the four output words, as kpdr.h specifies them."""
    m = np.uint64(0xFFFFFFFF)
    c0 = (counters & m).astype(np.uint64)
    c1 = (counters >> np.uint64(32)).astype(np.uint64)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = seed & 0xFFFFFFFF, seed >> 32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0 = np.uint64(0xD2511F53) * c0
        p1 = np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & m,
                          (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & m)
    return c0, c1, c2, c3


def reference(n, distribution, a=0.0, b=1.0, low=0, high=1, seed=None):
    """The values kpdr.h specifies for elements 0..n-1 (float32, or int64 for INTEGER)."""
    r0, r1, _, _ = philox(np.arange(n, dtype=np.uint64), SEED if seed is None else seed)
    u = (r0 >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)
    u1 = ((r0 >> np.uint64(8)) + np.uint64(1)).astype(np.float32) * np.float32(2.0 ** -24)
    a32, b32 = np.float32(a), np.float32(b)
    if distribution == UNIFORM:
        return a32 + (b32 - a32) * u
    if distribution == NORMAL:
        u2 = (r1 >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)
        z = np.sqrt(np.float32(-2.0) * np.log(u1)) * np.cos(np.float32(2 * np.pi) * u2)
        return a32 + b32 * z.astype(np.float32)
    if distribution == BERNOULLI:
        return (u < a32).astype(np.float32)
    if distribution == EXPONENTIAL:
        return (-np.log(u1) / a32).astype(np.float32)
    bits = r0 | (r1 << np.uint64(32))
    return (np.uint64(low & 0xFFFFFFFFFFFFFFFF) + bits % np.uint64(high - low)).astype(np.int64)


NUMPY = {DTYPE_FLOAT32: np.float32, DTYPE_BOOL: np.uint8, DTYPE_INT64: np.int64, DTYPE_INT32: np.int32,
         DTYPE_BFLOAT16: np.uint16}


SEED = 0x0123456789ABCDEF


def random_case(runtime, distribution, shape, strides=None, dtype=DTYPE_FLOAT32, a=0.0, b=1.0, low=0, high=1,
                seed=SEED, storage=None):
    """Fills a buffer of `storage` elements (default: the shape's) through the entry with the
    given strides (default: contiguous). Returns (code, buffer as numpy)."""
    session = Session(runtime)
    try:
        n = int(np.prod(shape))
        if strides is None:
            strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]
        storage = n if storage is None else storage
        args = RandomArgs(ndim=len(shape), dtype=dtype, distribution=distribution, a=a, b=b, low=low, high=high,
                          seed=seed)
        for d, (size, stride) in enumerate(zip(shape, strides)):
            args.sizes[d], args.out_strides[d] = size, stride
        buffer = np.full(storage, 7, NUMPY[dtype])
        args.out = session.upload(buffer)
        code = entry(runtime)(ctypes.byref(args), session.stream)
        if code != 0:
            return code, None
        return 0, session.download(args.out, (storage,), NUMPY[dtype]).copy()
    finally:
        session.close()


def bf16_to_float(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def check_entries(runtime):
    """The random entry against numpy's Philox reference, for every distribution."""
    assert entry(runtime) is not None
    n = 5000
    for distribution, kwargs, tol in ((UNIFORM, dict(a=-2.0, b=3.0), 1e-6), (NORMAL, dict(a=1.0, b=0.5), 1e-5),
                                      (BERNOULLI, dict(a=0.3), 0), (EXPONENTIAL, dict(a=2.0), 1e-5)):
        code, got = random_case(runtime, distribution, (n,), **kwargs)
        assert code == 0
        want = reference(n, distribution, **kwargs)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=str(distribution))
    # INTEGER in int64, int32 and bool; a full 64-bit range is exact.
    for dtype, low, high in ((DTYPE_INT64, -(2 ** 40), 2 ** 41 + 3), (DTYPE_INT32, -5, 17), (DTYPE_BOOL, 0, 2),
                             (DTYPE_INT64, -(2 ** 63), 2 ** 63 - 1)):
        code, got = random_case(runtime, INTEGER, (n,), dtype=dtype, low=low, high=high)
        assert code == 0
        np.testing.assert_array_equal(got.astype(np.int64), reference(n, INTEGER, low=low, high=high))
    # BERNOULLI into bool; bfloat16 rounds the float32 value.
    code, got = random_case(runtime, BERNOULLI, (n,), dtype=DTYPE_BOOL, a=0.75)
    assert code == 0 and np.array_equal(got, reference(n, BERNOULLI, a=0.75).astype(np.uint8))
    code, got = random_case(runtime, UNIFORM, (n,), dtype=DTYPE_BFLOAT16)
    assert code == 0
    np.testing.assert_allclose(bf16_to_float(got), reference(n, UNIFORM), rtol=4e-3, atol=0)
    # Element i of `sizes` (row-major) draws counter i wherever its strides put it; the
    # elements between are not written.
    code, got = random_case(runtime, UNIFORM, (3, 4), strides=(1, 6), storage=24)
    assert code == 0
    want = reference(12, UNIFORM).reshape(3, 4)
    written = np.zeros(24, bool)
    for i in range(3):
        for j in range(4):
            assert got[i + 6 * j] == want[i, j]
            written[i + 6 * j] = True
    assert np.all(got[~written] == 7)
    # A different seed gives other values; the same seed the same ones.
    _, first = random_case(runtime, UNIFORM, (64,), seed=1)
    _, again = random_case(runtime, UNIFORM, (64,), seed=1)
    _, other = random_case(runtime, UNIFORM, (64,), seed=2)
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    # Nothing to write is fine; bad calls are named.
    assert random_case(runtime, UNIFORM, (0, 3))[0] == 0
    assert random_case(runtime, NORMAL, (4,), dtype=DTYPE_INT64)[0] == NOT_SUPPORTED
    assert random_case(runtime, 9, (4,))[0] == NOT_SUPPORTED
    assert random_case(runtime, INTEGER, (4,), dtype=DTYPE_INT64, low=3, high=3)[0] == INVALID_VALUE
