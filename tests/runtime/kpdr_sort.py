"""The kernel table's ``sort`` entry (kpdr.h's kpdrSortArgs) through ctypes.

:func:`check_entries` runs the checks every runtime's tests share: the first k elements of
each slice in the documented order (NaN greatest, ties in input order) against a Python
reference, for every dtype, both directions, any strides, slices shorter and longer than a
work-group's tile, optional outputs, and the error codes.
"""

import ctypes
import math

import numpy as np

from kpdr_pointwise import INVALID_VALUE, Session, Strides
from kpdr_random import KernelTable as _EarlierTable  # kpdr.h's order: the entries before sort
from kpdr_gemm import table_entry

DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16, DTYPE_BOOL, DTYPE_INT64, DTYPE_INT32 = 0, 1, 2, 3, 4, 5
NUMPY = {DTYPE_FLOAT32: np.float32, DTYPE_FLOAT16: np.float16, DTYPE_BFLOAT16: np.uint16, DTYPE_BOOL: np.uint8,
         DTYPE_INT64: np.int64, DTYPE_INT32: np.int32}


class SortArgs(ctypes.Structure):
    _fields_ = [
        ("ndim", ctypes.c_int32), ("dim", ctypes.c_int32), ("sizes", Strides), ("k", ctypes.c_int64),
        ("dtype", ctypes.c_int),
        ("input", ctypes.c_void_p), ("in_strides", Strides),
        ("values", ctypes.c_void_p), ("values_strides", Strides),
        ("indices", ctypes.c_void_p), ("indices_strides", Strides),
        ("descending", ctypes.c_int32),
    ]  # fmt: skip


class KernelTable(_EarlierTable):
    _fields_ = [("sort", ctypes.c_void_p)]


def entry(runtime):
    """The runtime's sort entry (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, "sort", SortArgs)


def _keys(array, dtype):
    """The values the order compares: floats (bfloat16 bits widened), Python ints otherwise."""
    if dtype == DTYPE_BFLOAT16:
        return (array.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if dtype in (DTYPE_FLOAT32, DTYPE_FLOAT16):
        return array.astype(np.float64)
    return array.astype(object)


def reference(array, dim, k, descending, dtype):
    """(values, indices) kpdr.h specifies: the first k of each slice along dim in order."""
    keys = np.moveaxis(_keys(array, dtype), dim, -1)
    moved = np.moveaxis(array, dim, -1)
    flat_keys, flat = keys.reshape(-1, keys.shape[-1]), moved.reshape(-1, moved.shape[-1])
    values = np.empty((flat.shape[0], k), array.dtype)
    indices = np.empty((flat.shape[0], k), np.int64)

    def order_key(row):
        def key(j):
            v = row[j]
            nan = isinstance(v, float) and math.isnan(v)
            if descending:
                return (0 if nan else 1, 0 if nan else -v, j)
            return (1 if nan else 0, 0 if nan else v, j)
        return key

    for r in range(flat.shape[0]):
        order = sorted(range(flat.shape[1]), key=order_key(flat_keys[r]))[:k]
        values[r], indices[r] = flat[r, order], order
    shape = moved.shape[:-1] + (k,)
    return (np.moveaxis(values.reshape(shape), -1, dim), np.moveaxis(indices.reshape(shape), -1, dim))


def _strides(array):
    return [s // array.itemsize for s in array.strides]


def sort_case(runtime, array, dim, k, descending=False, dtype=DTYPE_FLOAT32, values=True, indices=True,
              transpose=None, out_gap=1):
    """Sorts `array` (its `transpose` view when given) along dim through the entry, writing
    into outputs whose elements lie `out_gap` apart (gaps keep a marker that must survive).
    Returns (code, values, indices) with the outputs shaped like the input, k along dim."""
    session = Session(runtime)
    try:
        view = array if transpose is None else array.transpose(transpose)
        out_shape = list(view.shape)
        if dim < view.ndim:
            out_shape[dim] = k
        count = int(np.prod(out_shape))
        args = SortArgs(ndim=view.ndim, dim=dim, k=k, dtype=dtype, descending=int(descending))
        args.input = session.upload(array)
        contiguous = [int(np.prod(out_shape[d + 1:])) * out_gap for d in range(view.ndim)]
        for d in range(view.ndim):
            args.sizes[d] = view.shape[d]
            args.in_strides[d] = _strides(view)[d]
            args.values_strides[d] = args.indices_strides[d] = contiguous[d]
        storage = max(1, count * out_gap)
        np_type = NUMPY.get(dtype, np.float32)
        if values:
            args.values = session.upload(np.full(storage, 3, np_type))
        if indices:
            args.indices = session.upload(np.full(storage, -7, np.int64))
        code = entry(runtime)(ctypes.byref(args), session.stream)
        if code != 0:
            return code, None, None
        got = []
        for address, kind, marker in ((args.values, np_type, 3), (args.indices, np.int64, -7)):
            if not address:
                got.append(None)
                continue
            raw = session.download(address, (storage,), kind).copy()
            mask = np.zeros(storage, bool)
            mask[: count * out_gap : out_gap] = True
            assert np.all(raw[~mask] == marker), "an element between the outputs was written"
            got.append(raw[: count * out_gap : out_gap].reshape(out_shape))
        return 0, got[0], got[1]
    finally:
        session.close()


def _check(runtime, array, dim, k, descending=False, dtype=DTYPE_FLOAT32, transpose=None, out_gap=1):
    view = array if transpose is None else array.transpose(transpose)
    code, values, indices = sort_case(runtime, array, dim, k, descending, dtype, transpose=transpose,
                                      out_gap=out_gap)
    assert code == 0, code
    want_values, want_indices = reference(view, dim, k, descending, dtype)
    what = f"dtype {dtype} shape {view.shape} dim {dim} k {k} descending {descending}"
    np.testing.assert_array_equal(indices, want_indices, err_msg=what)
    np.testing.assert_array_equal(np.ascontiguousarray(values).view(np.uint8),
                                  np.ascontiguousarray(want_values).view(np.uint8),
                                  err_msg=what)  # bit for bit


def data(rng, shape, dtype, ties=True):
    """Values with ties (few distinct values), NaN and signed zeros for the float dtypes."""
    if dtype in (DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16):
        x = rng.integers(-4, 5, size=shape).astype(np.float32) if ties else rng.standard_normal(shape).astype(np.float32)
        flat = x.reshape(-1)
        flat[rng.random(flat.size) < 0.1] = np.nan
        flat[rng.random(flat.size) < 0.05] = -0.0
        flat[rng.random(flat.size) < 0.03] = np.inf
        flat[rng.random(flat.size) < 0.03] = -np.inf
        if dtype == DTYPE_FLOAT16:
            return x.astype(np.float16)
        if dtype == DTYPE_BFLOAT16:
            return (x.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        return x
    if dtype == DTYPE_BOOL:
        return (rng.random(shape) < 0.5).astype(np.uint8)
    if dtype == DTYPE_INT64:  # values beyond float32's (and float64's) exact integers, with ties
        return rng.integers(-3, 4, size=shape).astype(np.int64) * (2 ** 61) + rng.integers(0, 2, size=shape)
    return rng.integers(-(2 ** 31), 2 ** 31 - 1, size=shape).astype(np.int32) // (2 ** 29)


def check_entries(runtime, long_slices=(2048, 5000)):
    """The sort entry against the reference: every dtype and direction, partial k, strided
    operands, slices around a work-group tile's length, optional outputs, bad calls."""
    assert entry(runtime) is not None
    rng = np.random.default_rng(0)
    for dtype in NUMPY:
        x = data(rng, (3, 37), dtype)
        for descending in (False, True):
            _check(runtime, x, 1, 37, descending, dtype)
            _check(runtime, x, 1, 5, descending, dtype)
            _check(runtime, x, 0, 3, descending, dtype)
    # Strided views in and out: a transposed input, outputs with gaps between elements.
    x = data(rng, (4, 6, 9), DTYPE_FLOAT32)
    _check(runtime, x, 1, 4, True, transpose=(2, 0, 1), out_gap=2)
    _check(runtime, x, 0, 9, False, transpose=(2, 1, 0))
    _check(runtime, x, 2, 6, False, transpose=(0, 2, 1), out_gap=3)
    # Slices of 1, a power of two, and longer than any local tile (full sort and top-k).
    _check(runtime, data(rng, (5, 1), DTYPE_FLOAT32), 1, 1)
    for n in long_slices:
        for dtype in (DTYPE_FLOAT32, DTYPE_INT64):
            x = data(rng, (2, n), dtype, ties=dtype != DTYPE_FLOAT32)
            _check(runtime, x, 1, n, False, dtype)
            _check(runtime, x, 1, 10, True, dtype)
        _check(runtime, data(rng, (n, 2), DTYPE_BFLOAT16), 0, 7, False, DTYPE_BFLOAT16)
    # Either output alone.
    x = data(rng, (4, 33), DTYPE_FLOAT32)
    want_values, want_indices = reference(x, 1, 33, False, DTYPE_FLOAT32)
    code, values, indices = sort_case(runtime, x, 1, 33, indices=False)
    assert code == 0 and indices is None and np.array_equal(values.view(np.uint32), want_values.view(np.uint32))
    code, values, indices = sort_case(runtime, x, 1, 33, descending=True, values=False)
    assert code == 0 and values is None
    assert np.array_equal(indices, reference(x, 1, 33, True, DTYPE_FLOAT32)[1])
    # Nothing to write: k = 0, no slice.
    assert sort_case(runtime, x, 1, 0)[0] == 0
    assert sort_case(runtime, np.zeros((0, 5), np.float32), 1, 5)[0] == 0
    # Bad calls are named: k beyond the slice, dim beyond ndim, an unknown dtype.
    assert sort_case(runtime, x, 1, 34)[0] == INVALID_VALUE
    assert sort_case(runtime, x, 2, 1)[0] == INVALID_VALUE
    assert sort_case(runtime, x, 1, 3, dtype=9)[0] == INVALID_VALUE
