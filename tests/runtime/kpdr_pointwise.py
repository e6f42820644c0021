"""The kernel table's ``pointwise`` and ``reduce`` entries (kpdr.h's core-op section) through ctypes.

:func:`pointwise_case` and :func:`reduce_case` upload float32 numpy arrays, call the
runtime's entry on a stream with the strides the caller gives, and return the result.
"""

import ctypes

import numpy as np

from kpdr_gemm import _EARLIER_ENTRIES, table_entry

DTYPE_FLOAT32, DTYPE_BOOL = 0, 3
NOT_SUPPORTED, INVALID_VALUE = 8, 1
MAX_DIMS = 8
# Op codes (kpdr.h's kpdrPointwiseOp / kpdrReduceOp).
POINTWISE = dict(copy=0, neg=1, exp=3, relu=7, add=32, mul=34, div=35, lt=40, lerp=44, where=64, addcmul=65)
REDUCE = dict(sum=0, mean=1, amax=2, amin=3)

Strides = ctypes.c_int64 * MAX_DIMS


class Operand(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("strides", Strides), ("value", ctypes.c_double)]


class PointwiseArgs(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int32), ("ndim", ctypes.c_int32), ("sizes", Strides),
        ("out", ctypes.c_void_p), ("out_dtype", ctypes.c_int), ("out_strides", Strides),
        ("inputs", Operand * 3), ("alpha", ctypes.c_double),
    ]  # fmt: skip


class ReduceArgs(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int32), ("ndim", ctypes.c_int32), ("sizes", Strides), ("reduce_mask", ctypes.c_uint32),
        ("input", ctypes.c_void_p), ("in_dtype", ctypes.c_int), ("in_strides", Strides),
        ("out", ctypes.c_void_p), ("out_dtype", ctypes.c_int), ("out_strides", Strides),
    ]  # fmt: skip


class KernelTable(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [(name, ctypes.c_void_p) for name in _EARLIER_ENTRIES] + [
        ("gemm", ctypes.c_void_p), ("pointwise", ctypes.c_void_p), ("reduce", ctypes.c_void_p)]


def entry(runtime, name, args_type):
    """The runtime's entry `name` (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, name, args_type)


def _elements(array):
    return tuple(s // array.itemsize for s in array.strides)


class Session:
    """Device buffers of one case, freed on close."""

    def __init__(self, runtime):
        self.runtime, self.stream, self.buffers, self.keep = runtime, runtime.stream(0), [], []

    def upload(self, array, offset=0):
        """The array's device copy, starting `offset` elements into its allocation (misaligned
        for offsets that are not multiples of 4)."""
        array = np.ascontiguousarray(array)
        data = np.zeros(offset, dtype=array.dtype).tobytes() + array.tobytes()
        address = self.runtime.malloc(0, max(1, len(data)))
        self.buffers.append(address)
        if data:
            self.keep.append(self.runtime.upload(address, data, self.stream))
        return address + offset * array.itemsize

    def download(self, address, shape, dtype=np.float32):
        count = int(np.prod(shape))
        raw = self.runtime.download(address, count * np.dtype(dtype).itemsize, self.stream)
        return np.frombuffer(raw, dtype=dtype).reshape(shape)

    def close(self):
        for address in self.buffers:
            self.runtime.check(self.runtime.kpdrFree(0, ctypes.c_void_p(address)))


def pointwise_case(runtime, op, inputs, shape, alpha=1.0, out_dtype=DTYPE_FLOAT32, offset=0):
    """out[shape] = op(inputs) through the entry; inputs are float32 arrays broadcastable to
    shape (their broadcast strides are passed, 0 where they repeat) or Python floats. Array
    inputs start `offset` elements into their allocations."""
    session = Session(runtime)
    try:
        args = PointwiseArgs(op=POINTWISE[op], ndim=len(shape), alpha=alpha, out_dtype=out_dtype)
        for d, size in enumerate(shape):
            args.sizes[d] = size
        out_item = 1 if out_dtype == DTYPE_BOOL else 4
        args.out = session.upload(np.zeros(int(np.prod(shape)) * out_item, dtype=np.uint8))
        for d in range(len(shape)):
            args.out_strides[d] = int(np.prod(shape[d + 1:]))
        for k, value in enumerate(inputs):
            if isinstance(value, float):
                args.inputs[k].data, args.inputs[k].value = None, value
                continue
            array = np.asarray(value, dtype=np.float32)
            args.inputs[k].data = session.upload(array, offset)
            args.inputs[k].dtype = DTYPE_FLOAT32
            view = np.broadcast_to(np.ascontiguousarray(array), shape)
            for d, stride in enumerate(_elements(view)):
                args.inputs[k].strides[d] = stride
        code = entry(runtime, "pointwise", PointwiseArgs)(ctypes.byref(args), session.stream)
        if code != 0:
            return code, None
        return 0, session.download(args.out, shape, np.uint8 if out_dtype == DTYPE_BOOL else np.float32).copy()
    finally:
        session.close()


def reduce_case(runtime, op, array, dims, transpose=None, offset=0):
    """op of a float32 array over `dims` through the entry (its transpose view when given),
    the array starting `offset` elements into its allocation."""
    session = Session(runtime)
    try:
        stored = np.ascontiguousarray(array, dtype=np.float32)
        view = stored.transpose(transpose) if transpose else stored
        kept_shape = [s for d, s in enumerate(view.shape) if d not in dims]
        args = ReduceArgs(op=REDUCE[op], ndim=view.ndim, in_dtype=DTYPE_FLOAT32, out_dtype=DTYPE_FLOAT32)
        args.input = session.upload(stored, offset)
        args.out = session.upload(np.zeros(max(1, int(np.prod(kept_shape))), dtype=np.float32))
        kept_strides = _elements(np.zeros(kept_shape, dtype=np.float32)) if kept_shape else ()
        j = 0
        for d in range(view.ndim):
            args.sizes[d] = view.shape[d]
            args.in_strides[d] = _elements(view)[d]
            if d in dims:
                args.reduce_mask |= 1 << d
            else:
                args.out_strides[d] = kept_strides[j]
                j += 1
        code = entry(runtime, "reduce", ReduceArgs)(ctypes.byref(args), session.stream)
        if code != 0:
            return code, None
        return 0, session.download(args.out, kept_shape).copy()
    finally:
        session.close()


def check_entries(runtime):
    """The checks shared by every runtime's tests: numpy's results, and the error codes."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 1, 6)).astype(np.float32), rng.standard_normal((3, 1)).astype(np.float32)
    shape = (4, 3, 6)
    code, got = pointwise_case(runtime, "add", [a, b], shape, alpha=-2.0)
    assert code == 0
    np.testing.assert_allclose(got, a - 2.0 * b, rtol=1e-6, atol=1e-6)
    code, got = pointwise_case(runtime, "mul", [a, 0.5], shape)
    np.testing.assert_allclose(got, np.broadcast_to(a * 0.5, shape), rtol=1e-6)
    code, got = pointwise_case(runtime, "lt", [a, b], shape, out_dtype=DTYPE_BOOL)
    assert code == 0 and got.dtype == np.uint8
    np.testing.assert_array_equal(got, (a < b).astype(np.uint8))
    code, got = pointwise_case(runtime, "where", [(a > 0).astype(np.float32), b, 7.0], shape)
    np.testing.assert_allclose(got, np.where(a > 0, b, 7.0))
    code, got = pointwise_case(runtime, "copy", [3.5], (2, 5))
    np.testing.assert_array_equal(got, np.full((2, 5), 3.5, np.float32))
    code, got = pointwise_case(runtime, "exp", [a], (4, 1, 6))
    np.testing.assert_allclose(got, np.exp(a), rtol=1e-5)
    x = rng.standard_normal((5, 7, 9)).astype(np.float32)
    for op, fn in (("sum", np.sum), ("mean", np.mean), ("amax", np.max), ("amin", np.min)):
        for dims in ((0,), (1, 2), (0, 1, 2)):
            code, got = reduce_case(runtime, op, x, dims)
            assert code == 0, (op, dims)
            np.testing.assert_allclose(got.reshape(-1), np.asarray(fn(x, axis=dims)).reshape(-1), rtol=1e-5, atol=1e-5)
    code, got = reduce_case(runtime, "sum", x, (1,), transpose=(2, 0, 1))
    np.testing.assert_allclose(got, x.transpose(2, 0, 1).sum(1), rtol=1e-5, atol=1e-5)
    # An op code the runtime does not know: NOT_SUPPORTED, nothing enqueued (the caller falls back).
    bad = PointwiseArgs(op=1000, ndim=1)
    assert entry(runtime, "pointwise", PointwiseArgs)(ctypes.byref(bad), runtime.stream(0)) == NOT_SUPPORTED
    bad = ReduceArgs(op=99, ndim=1)
    assert entry(runtime, "reduce", ReduceArgs)(ctypes.byref(bad), runtime.stream(0)) == NOT_SUPPORTED
    # Malformed calls: INVALID_VALUE with a message.
    bad = PointwiseArgs(op=POINTWISE["neg"], ndim=MAX_DIMS + 1)
    assert entry(runtime, "pointwise", PointwiseArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    assert "ndim" in runtime.last_error_message()
    bad = ReduceArgs(op=0, ndim=2, reduce_mask=0b100)
    bad.sizes[0] = bad.sizes[1] = 1
    assert entry(runtime, "reduce", ReduceArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    assert "reduce_mask" in runtime.last_error_message()


def check_layouts(runtime):
    """Contiguous operands (a runtime may take a fast path for them: OpenCL's vector kernels)
    against numpy: lengths with a remainder past whole vectors, misaligned starts, a
    one-element operand broadcast, and reductions over short and long rows, over columns,
    and over everything, with NaN propagating."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(4003).astype(np.float32), rng.standard_normal(4003).astype(np.float32)
    for offset in (0, 1, 2):
        code, got = pointwise_case(runtime, "add", [a, b], (4003,), alpha=0.5, offset=offset)
        assert code == 0, offset
        np.testing.assert_allclose(got, a + 0.5 * b, rtol=1e-6, atol=1e-6)
    m = rng.standard_normal((31, 65)).astype(np.float32)
    code, got = pointwise_case(runtime, "mul", [m, np.float32([[2.5]])], (31, 65))
    np.testing.assert_allclose(got, m * 2.5, rtol=1e-6)
    code, got = pointwise_case(runtime, "where", [(m > 0).astype(np.float32), m, -1.0], (31, 65))
    np.testing.assert_array_equal(got, np.where(m > 0, m, -1.0))
    code, got = pointwise_case(runtime, "lt", [m, 0.0], (31, 65), out_dtype=DTYPE_BOOL)
    np.testing.assert_array_equal(got, (m < 0).astype(np.uint8))
    fns = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}
    cases = [((37, 1001), (1,), 0), ((5, 64), (1,), 0), ((3, 70000), (1,), 0), ((2, 3, 50000), (0, 1, 2), 0),
             ((1000, 300), (0,), 0), ((1000, 301), (0,), 0), ((1000, 300), (0,), 1), ((4, 333, 40), (0, 1), 0),
             ((513, 64), (1,), 3), ((40000, 8), (0,), 0), ((1000, 16), (0,), 0)]
    for shape, dims, offset in cases:
        x = rng.standard_normal(shape).astype(np.float32)
        for op, fn in fns.items():
            code, got = reduce_case(runtime, op, x, dims, offset=offset)
            assert code == 0, (op, shape, dims)
            want = np.asarray(fn(x.astype(np.float64), axis=dims)).reshape(-1)
            np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-3, err_msg=f"{op} {shape} {dims}")
    x = rng.standard_normal((600, 256)).astype(np.float32)
    x[123, 7] = x[5, 200] = np.nan
    for dims in ((0,), (1,)):
        code, got = reduce_case(runtime, "amax", x, dims)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(x.max(axis=dims)))
    # NaN in every part of a row kernel: vector loop, its tail, the unaligned start, a split
    # row's parts; amax and amin ignore it nowhere, and rows without it are exact.
    x = rng.standard_normal((4, 70001)).astype(np.float32)
    x[0, 5], x[1, 70000], x[2, 40000] = np.nan, np.nan, np.nan
    for op, fn in (("amax", np.max), ("amin", np.min)):
        for offset in (0, 1):
            code, got = reduce_case(runtime, op, x, (1,), offset=offset)
            assert code == 0, (op, offset)
            np.testing.assert_array_equal(got, fn(x, axis=1), err_msg=f"{op} offset {offset}")
    # Columns over many rows: the rows are split over work-groups whose last one finishes.
    x = rng.standard_normal((30001, 8)).astype(np.float32)
    x[29000, 3] = x[7, 6] = np.nan
    for op, fn in (("amax", np.max), ("amin", np.min), ("sum", np.sum)):
        code, got = reduce_case(runtime, op, x, (0,))
        assert code == 0, op
        np.testing.assert_allclose(got, fn(x.astype(np.float64), axis=0), rtol=1e-5, atol=1e-3, err_msg=op)
