"""The kernel table's ``scan`` entry (kpdr.h: prefix combinations along one dimension) through ctypes.

:func:`check_entries` runs the checks every runtime's tests share: each op inclusive and
exclusive against numpy, strided and reversed (negative-stride) operands, in place, integer
arithmetic exact in 64 bits, lines long enough for a runtime's multi-block path, and the
error codes.
"""

import ctypes

import numpy as np

from kpdr_pointwise import INVALID_VALUE, NOT_SUPPORTED, Session, Strides
from kpdr_random import DTYPE_BFLOAT16, DTYPE_BOOL, DTYPE_FLOAT32, DTYPE_INT32, DTYPE_INT64, bf16_to_float
from kpdr_sort import KernelTable as _EarlierTable  # kpdr.h's order: the entries before scan (sort is just before)
from kpdr_gemm import table_entry, to_bf16_bits

SUM, PROD, MAX, MIN, LOGADDEXP = 0, 1, 2, 3, 4
NUMPY = {DTYPE_FLOAT32: np.float32, DTYPE_BOOL: np.uint8, DTYPE_INT64: np.int64, DTYPE_INT32: np.int32,
         DTYPE_BFLOAT16: np.uint16}


class ScanArgs(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int32), ("exclusive", ctypes.c_int32), ("ndim", ctypes.c_int32), ("dim", ctypes.c_int32),
        ("sizes", Strides),
        ("input", ctypes.c_void_p), ("in_dtype", ctypes.c_int), ("in_strides", Strides),
        ("out", ctypes.c_void_p), ("out_dtype", ctypes.c_int), ("out_strides", Strides),
    ]  # fmt: skip


class KernelTable(_EarlierTable):
    _fields_ = [("scan", ctypes.c_void_p)]


def entry(runtime):
    """The runtime's scan entry (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, "scan", ScanArgs)


def reference(x, op, axis, exclusive=False):
    """kpdr.h's scan of x (float64 or int64 numpy) along axis."""
    x = np.moveaxis(x, axis, -1)
    integer = x.dtype.kind in "iu"
    out = np.empty_like(x)
    if integer:
        acc = np.full(x.shape[:-1], {SUM: 0, PROD: 1, MAX: np.iinfo(np.int64).min, MIN: np.iinfo(np.int64).max}[op],
                      np.int64)
    else:
        acc = np.full(x.shape[:-1], {SUM: 0.0, PROD: 1.0, MAX: -np.inf, MIN: np.inf, LOGADDEXP: -np.inf}[op])
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(x.shape[-1]):
            v = x[..., j]
            if op == SUM:
                nxt = acc + v
            elif op == PROD:
                nxt = acc * v
            elif op in (MAX, MIN):
                nxt = np.maximum(acc, v) if op == MAX else np.minimum(acc, v)  # NaN propagates
            else:
                nxt = np.logaddexp(acc, v)
            out[..., j] = acc if exclusive else nxt
            acc = nxt
    return np.moveaxis(out, -1, axis)


def scan_case(runtime, op, array, dim, exclusive=False, in_dtype=DTYPE_FLOAT32, out_dtype=DTYPE_FLOAT32,
              transpose=False, reverse=False, in_place=False):
    """Scans `array` (numpy, stored as in_dtype) along dim through the entry. transpose: the
    input and output are column-major views; reverse: in and out point at each line's last
    element with the dim's strides negated (a scan from the end); in_place: out is in.
    Returns (code, result as numpy in the shape of array)."""
    session = Session(runtime)
    try:
        shape = array.shape
        ndim = len(shape)
        stored = array.astype(NUMPY[in_dtype]) if in_dtype != DTYPE_BFLOAT16 else to_bf16_bits(array)
        if transpose:
            stored = np.asfortranarray(stored)
        element_strides = [s // stored.itemsize for s in stored.strides]
        args = ScanArgs(op=op, exclusive=int(exclusive), ndim=ndim, dim=dim, in_dtype=in_dtype, out_dtype=out_dtype)
        flat = stored.ravel(order="K")
        args.input = session.upload(flat)
        out_type = NUMPY[out_dtype]
        out_strides = element_strides if transpose else [int(np.prod(shape[d + 1:])) for d in range(ndim)]
        args.out = args.input if in_place else session.upload(np.zeros(flat.size, out_type))
        in_item, out_item = np.dtype(NUMPY[in_dtype]).itemsize, np.dtype(out_type).itemsize
        for d in range(ndim):
            args.sizes[d] = shape[d]
            args.in_strides[d] = element_strides[d]
            args.out_strides[d] = out_strides[d]
        if reverse and shape[dim] > 0:
            args.input += (shape[dim] - 1) * element_strides[dim] * in_item
            args.out += (shape[dim] - 1) * out_strides[dim] * out_item
            args.in_strides[dim] = -element_strides[dim]
            args.out_strides[dim] = -out_strides[dim]
            base_out = args.out - (shape[dim] - 1) * out_strides[dim] * out_item
        else:
            base_out = args.out
        code = entry(runtime)(ctypes.byref(args), session.stream)
        if code != 0 or flat.size == 0:
            return code, None if code else np.zeros(shape, out_type)
        raw = session.download(base_out, (flat.size,), out_type).copy()
        got = np.lib.stride_tricks.as_strided(raw, shape, [s * out_item for s in out_strides]).copy()
        if out_dtype == DTYPE_BFLOAT16:
            got = bf16_to_float(got)
        return 0, got
    finally:
        session.close()


def _check(runtime, op, x, dim, rtol=1e-5, atol=1e-5, **kwargs):
    code, got = scan_case(runtime, op, x, dim, **kwargs)
    assert code == 0, (op, x.shape, dim, kwargs)
    src = x[(slice(None),) * dim + (slice(None, None, -1),)] if kwargs.get("reverse") else x
    want = reference(src.astype(np.int64 if x.dtype.kind in "iub" else np.float64), op, dim,
                     kwargs.get("exclusive", False))
    if kwargs.get("reverse"):
        want = want[(slice(None),) * dim + (slice(None, None, -1),)]
    if want.dtype.kind == "i":
        np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=str((op, x.shape, dim, kwargs)))
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=str((op, x.shape, dim, kwargs)))


def check_entries(runtime):
    """The scan entry against numpy for every op, layout, dtype and line length."""
    assert entry(runtime) is not None
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 37)).astype(np.float32)
    for op in (SUM, PROD, MAX, MIN, LOGADDEXP):
        for exclusive in (False, True):
            for dim in (0, 1):
                _check(runtime, op, x, dim, exclusive=exclusive)
                _check(runtime, op, x, dim, exclusive=exclusive, transpose=True)
                _check(runtime, op, x, dim, exclusive=exclusive, reverse=True)
    _check(runtime, SUM, x, 1, in_place=True)
    # NaN propagates through MAX and MIN from where it appears.
    nan = np.array([[1.0, 3.0, np.nan, 5.0, 2.0]], np.float32)
    _check(runtime, MAX, nan, 1)
    _check(runtime, MIN, nan, 1)
    # Lines long enough for multi-block paths, one and several lines; float32 sums of ones are exact.
    for shape in ((300_001,), (3, 70_001)):
        ones = np.ones(shape, np.float32)
        _check(runtime, SUM, ones, len(shape) - 1, rtol=0, atol=0)
        _check(runtime, SUM, ones, len(shape) - 1, rtol=0, atol=0, exclusive=True)
        _check(runtime, MAX, rng.standard_normal(shape).astype(np.float32), len(shape) - 1)
    # Integer arithmetic: exact in 64 bits, bool and int32 inputs, int32 output truncated.
    big = rng.integers(-(2 ** 40), 2 ** 40, (4, 33))
    for op in (SUM, PROD, MAX, MIN):
        _check(runtime, op, big, 1, in_dtype=DTYPE_INT64, out_dtype=DTYPE_INT64)
    mask = rng.random((200_003,)) < 0.3
    _check(runtime, SUM, mask, 0, in_dtype=DTYPE_BOOL, out_dtype=DTYPE_INT64, exclusive=True)
    _check(runtime, SUM, mask.reshape(1, -1), 1, in_dtype=DTYPE_BOOL, out_dtype=DTYPE_INT64)
    small = rng.integers(-100, 100, (6, 9))
    _check(runtime, SUM, small, 0, in_dtype=DTYPE_INT32, out_dtype=DTYPE_INT32)
    # bfloat16 storage: the values round to it.
    code, got = scan_case(runtime, SUM, x, 1, in_dtype=DTYPE_BFLOAT16, out_dtype=DTYPE_BFLOAT16)
    assert code == 0
    want = reference(bf16_to_float(to_bf16_bits(x)).astype(np.float64), SUM, 1)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-2)
    # Nothing to scan is fine; bad calls are named.
    assert scan_case(runtime, SUM, np.zeros((0, 4), np.float32), 1)[0] == 0
    assert scan_case(runtime, SUM, np.zeros((3, 0), np.float32), 1)[0] == 0
    assert scan_case(runtime, 9, x, 1)[0] == NOT_SUPPORTED
    assert scan_case(runtime, LOGADDEXP, small, 1, in_dtype=DTYPE_INT64, out_dtype=DTYPE_INT64)[0] == NOT_SUPPORTED
    assert scan_case(runtime, SUM, x, 1, in_dtype=DTYPE_FLOAT32, out_dtype=DTYPE_INT64)[0] == INVALID_VALUE
    assert scan_case(runtime, SUM, x, 2)[0] == INVALID_VALUE
