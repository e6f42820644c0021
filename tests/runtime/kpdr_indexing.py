"""The kernel table's ``gather`` and ``scatter`` entries, and the pointwise entry's integer
arithmetic and index-dependent codes (kpdr.h's core-op section), through ctypes.

:func:`check_entries` runs the checks every runtime's tests share: numpy's results, the
out-of-range report in the error buffer, and the error codes.
"""

import ctypes

import numpy as np

from kpdr_gemm import table_entry

from kpdr_pointwise import MAX_DIMS, NOT_SUPPORTED, INVALID_VALUE, PointwiseArgs, Session, Strides

DTYPE_FLOAT32, DTYPE_BFLOAT16, DTYPE_INT64, DTYPE_INT32 = 0, 2, 4, 5
# kpdrPointwiseOp codes this file uses.
ADD, MUL, LT, EXP, BITWISE_NOT, BITWISE_AND, ARANGE, TRIL = 32, 34, 40, 3, 18, 54, 80, 82


class IndexOperand(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("strides", Strides),
                ("size", ctypes.c_int64), ("stride", ctypes.c_int64)]


class IndexArgs(ctypes.Structure):
    _fields_ = [
        ("ndim", ctypes.c_int32), ("sizes", Strides), ("dtype", ctypes.c_int),
        ("dense", ctypes.c_void_p), ("dense_strides", Strides),
        ("indexed", ctypes.c_void_p), ("indexed_strides", Strides),
        ("num_indices", ctypes.c_int32), ("indices", IndexOperand * MAX_DIMS),
        ("wrap", ctypes.c_int32), ("accumulate", ctypes.c_int32), ("alpha", ctypes.c_double),
        ("skip", ctypes.c_int32), ("skip_value", ctypes.c_int64), ("error", ctypes.c_void_p),
    ]  # fmt: skip


from kpdr_conv import KernelTable as _EarlierTable  # kpdr.h's order: the entries before gather/scatter


class KernelTable(_EarlierTable):
    _fields_ = [("gather", ctypes.c_void_p), ("scatter", ctypes.c_void_p)]


def entry(runtime, name, args_type):
    """The runtime's entry `name` (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, name, args_type)


def rows_case(runtime, scatter, table, index, dense=None, accumulate=0, wrap=0, skip=None, index_dtype=np.int64):
    """Gather rows `index` of float32 `table` (scatter: add/store `dense` rows into them)
    through the entry. Returns (code, result, error buffer)."""
    session = Session(runtime)
    try:
        table = np.ascontiguousarray(table, dtype=np.float32)
        index = np.ascontiguousarray(index, dtype=index_dtype)
        n, width = len(index), table.shape[1]
        args = IndexArgs(ndim=2, dtype=DTYPE_FLOAT32, num_indices=1, wrap=wrap, accumulate=accumulate, alpha=1.0)
        args.sizes[0], args.sizes[1] = n, width
        dense = np.zeros((n, width), np.float32) if dense is None else np.ascontiguousarray(dense, np.float32)
        args.dense = session.upload(dense)
        args.dense_strides[0], args.dense_strides[1] = width, 1
        args.indexed = session.upload(table)
        args.indexed_strides[0], args.indexed_strides[1] = 0, 1
        op = args.indices[0]
        op.data = session.upload(index)
        op.dtype = DTYPE_INT32 if index_dtype == np.int32 else DTYPE_INT64
        op.strides[0], op.strides[1] = 1, 0
        op.size, op.stride = table.shape[0], width
        if skip is not None:
            args.skip, args.skip_value = 1, skip
        args.error = session.upload(np.zeros(2, np.int64))
        code = entry(runtime, "scatter" if scatter else "gather", IndexArgs)(ctypes.byref(args), session.stream)
        if code != 0:
            return code, None, None
        result = session.download(args.indexed if scatter else args.dense, table.shape if scatter else (n, width))
        return 0, result.copy(), session.download(args.error, (2,), np.int64).copy()
    finally:
        session.close()


def integer_case(runtime, op, inputs, shape, out_dtype=DTYPE_INT64, alpha=0.0):
    """out = op(inputs) through the pointwise entry with int64 arrays (or Python ints) in integer arithmetic."""
    session = Session(runtime)
    try:
        args = PointwiseArgs(op=op, ndim=len(shape), alpha=alpha, out_dtype=out_dtype)
        item = {DTYPE_INT64: 8, DTYPE_INT32: 4, DTYPE_FLOAT32: 4}[out_dtype]
        args.out = session.upload(np.zeros(int(np.prod(shape)) * item, np.uint8))
        for d, size in enumerate(shape):
            args.sizes[d] = size
            args.out_strides[d] = int(np.prod(shape[d + 1:]))
        for k, value in enumerate(inputs):
            if isinstance(value, int):
                args.inputs[k].data, args.inputs[k].dtype, args.inputs[k].value = None, DTYPE_INT64, value
                continue
            array = np.ascontiguousarray(value, dtype=np.int64)
            args.inputs[k].data = session.upload(array)
            args.inputs[k].dtype = DTYPE_INT64
            view = np.broadcast_to(array, shape)
            for d, stride in enumerate(view.strides):
                args.inputs[k].strides[d] = stride // 8
        code = entry(runtime, "pointwise", PointwiseArgs)(ctypes.byref(args), session.stream)
        if code != 0:
            return code, None
        dtype = {DTYPE_INT64: np.int64, DTYPE_INT32: np.int32, DTYPE_FLOAT32: np.float32}[out_dtype]
        return 0, session.download(args.out, shape, dtype).copy()
    finally:
        session.close()


def check_entries(runtime):
    """numpy's results, the error buffer, and the error codes, for any runtime."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((9, 5)).astype(np.float32)
    index = np.array([3, 0, 8, 3])
    code, got, error = rows_case(runtime, False, table, index)
    assert code == 0 and error.tolist() == [0, 0]
    np.testing.assert_array_equal(got, table[index])
    code, got, _ = rows_case(runtime, False, table, np.array([1, 2]), index_dtype=np.int32)
    np.testing.assert_array_equal(got, table[[1, 2]])
    # Negative indices count from the end only with wrap.
    code, got, error = rows_case(runtime, False, table, np.array([-1, 2]), wrap=1)
    np.testing.assert_array_equal(got, table[[-1, 2]])
    assert error.tolist() == [0, 0]
    code, got, error = rows_case(runtime, False, table, np.array([-1, 2]))
    assert code == 0 and error.tolist() == [1, -1]
    np.testing.assert_array_equal(got[0], 0)  # the bad element is written as 0, never garbage
    code, got, error = rows_case(runtime, False, table, np.array([4, 9]))
    assert error.tolist() == [1, 9]
    # Scatter: duplicates accumulate; skip_value rows are left alone; bad indices are skipped.
    dense = rng.standard_normal((6, 5)).astype(np.float32)
    idx = np.array([2, 2, 7, 2, 0, 7])
    code, got, error = rows_case(runtime, True, np.zeros((9, 5)), idx, dense=dense, accumulate=1)
    expected = np.zeros((9, 5), np.float32)
    np.add.at(expected, idx, dense)
    assert code == 0 and error.tolist() == [0, 0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    code, got, _ = rows_case(runtime, True, np.zeros((9, 5)), idx, dense=dense, accumulate=1, skip=7)
    expected = np.zeros((9, 5), np.float32)
    np.add.at(expected, idx[idx != 7], dense[idx != 7])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    code, got, error = rows_case(runtime, True, np.ones((9, 5)), np.array([1, 11]), dense=dense[:2])
    assert error.tolist() == [1, 11]
    np.testing.assert_array_equal(got[1], dense[0])
    np.testing.assert_array_equal(np.delete(got, 1, axis=0), 1.0)
    # Pointwise in integer arithmetic: exact beyond float's 24 bits, wrapping.
    a = np.array([2 ** 40 + 1, -(2 ** 62), 7], np.int64)
    b = np.array([3, -(2 ** 62), -9], np.int64)
    code, got = integer_case(runtime, ADD, [a, b], (3,), alpha=2)
    assert code == 0
    np.testing.assert_array_equal(got, a + 2 * b)
    code, got = integer_case(runtime, MUL, [a, 1 << 20], (3,))
    np.testing.assert_array_equal(got, a * (1 << 20))
    code, got = integer_case(runtime, BITWISE_NOT, [a], (3,))
    np.testing.assert_array_equal(got, ~a)
    code, got = integer_case(runtime, BITWISE_AND, [a, b], (3,))
    np.testing.assert_array_equal(got, a & b)
    code, got = integer_case(runtime, ARANGE, [2 ** 40], (2, 3), alpha=-3)
    np.testing.assert_array_equal(got, (2 ** 40 - 3 * np.arange(6)).reshape(2, 3))
    m = np.arange(1, 13, dtype=np.int64).reshape(3, 4)
    code, got = integer_case(runtime, TRIL, [m], (3, 4), alpha=1)
    np.testing.assert_array_equal(got, np.tril(m, 1))
    code, got = integer_case(runtime, ADD, [a, 1], (3,), out_dtype=DTYPE_INT32, alpha=1)
    np.testing.assert_array_equal(got, (a + 1).astype(np.int32))
    # Codes without an integer form, bitwise ops on floats, TRIL of one dimension: NOT_SUPPORTED.
    assert integer_case(runtime, EXP, [a], (3,))[0] == NOT_SUPPORTED
    assert integer_case(runtime, TRIL, [a], (3,))[0] == NOT_SUPPORTED
    assert integer_case(runtime, BITWISE_NOT, [a], (3,), out_dtype=DTYPE_FLOAT32)[0] == NOT_SUPPORTED
    # Malformed calls: INVALID_VALUE with a message.
    bad = IndexArgs(ndim=1, num_indices=0, dtype=DTYPE_FLOAT32)
    assert entry(runtime, "gather", IndexArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    assert "num_indices" in runtime.last_error_message()
    bad = IndexArgs(ndim=1, num_indices=1, dtype=DTYPE_FLOAT32)
    bad.indices[0].dtype = DTYPE_FLOAT32
    assert entry(runtime, "scatter", IndexArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    assert "INT64 or INT32" in runtime.last_error_message()
