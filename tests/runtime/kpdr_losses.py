"""The kernel table's ``softmax_dim``, ``nll_loss`` and ``layer_norm`` entries and the ``reduce``
entry's statistics codes (kpdr.h's core-op section) through ctypes, against numpy.

:func:`check_entries` is shared by every runtime's tests (the simulator in both memory modes,
the OpenCL runtime).
"""

import ctypes

import numpy as np

from kpdr_gemm import table_entry

from kpdr_pointwise import MAX_DIMS, KernelTable as _PointwiseTable, Operand, ReduceArgs as _ReduceArgs, Session

DTYPE_FLOAT32, DTYPE_INT64 = 0, 4
NOT_SUPPORTED, INVALID_VALUE = 8, 1
SOFTMAX = dict(softmax=0, log_softmax=1, softmax_backward=2, log_softmax_backward=3)
REDUCE = dict(argmax=4, argmin=5, var=6, std=7)
Strides = ctypes.c_int64 * MAX_DIMS
Long3, Long2 = ctypes.c_int64 * 3, ctypes.c_int64 * 2


class ReduceArgs(_ReduceArgs):
    _fields_ = [("correction", ctypes.c_double)]  # appended to kpdrReduceArgs


class SoftmaxDimArgs(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int32), ("ndim", ctypes.c_int32), ("dim", ctypes.c_int32), ("sizes", Strides),
        ("out", ctypes.c_void_p), ("out_dtype", ctypes.c_int), ("out_strides", Strides),
        ("x", Operand), ("grad", Operand),
    ]  # fmt: skip


class NllLossArgs(ctypes.Structure):
    _fields_ = [
        ("backward", ctypes.c_int32), ("reduction", ctypes.c_int32), ("dtype", ctypes.c_int),
        ("target_dtype", ctypes.c_int), ("batch", ctypes.c_int64), ("classes", ctypes.c_int64),
        ("spatial", ctypes.c_int64), ("ignore_index", ctypes.c_int64),
        ("input", ctypes.c_void_p), ("input_strides", Long3),
        ("grad_input", ctypes.c_void_p), ("grad_input_strides", Long3),
        ("target", ctypes.c_void_p), ("target_strides", Long2),
        ("weight", ctypes.c_void_p), ("weight_stride", ctypes.c_int64),
        ("out", ctypes.c_void_p), ("grad_output", ctypes.c_void_p), ("out_strides", Long2),
        ("total_weight", ctypes.c_void_p),
    ]  # fmt: skip


class LayerNormArgs(ctypes.Structure):
    _fields_ = [
        ("backward", ctypes.c_int32), ("dtype", ctypes.c_int), ("weight_dtype", ctypes.c_int),
        ("stats_dtype", ctypes.c_int), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("x_row_stride", ctypes.c_int64),
        ("weight", ctypes.c_void_p), ("bias", ctypes.c_void_p), ("eps", ctypes.c_float),
        ("mean", ctypes.c_void_p), ("rstd", ctypes.c_void_p),
        ("out", ctypes.c_void_p), ("out_row_stride", ctypes.c_int64),
        ("grad_out", ctypes.c_void_p), ("grad_out_row_stride", ctypes.c_int64),
        ("grad_input", ctypes.c_void_p), ("grad_input_row_stride", ctypes.c_int64),
        ("grad_weight", ctypes.c_void_p), ("grad_bias", ctypes.c_void_p),
    ]  # fmt: skip


class KernelTable(_PointwiseTable):
    _fields_ = [("softmax_dim", ctypes.c_void_p), ("nll_loss", ctypes.c_void_p), ("layer_norm", ctypes.c_void_p)]


def entry(runtime, name, args_type):
    """The runtime's entry `name` (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, name, args_type)


def _elements(array):
    return tuple(s // array.itemsize for s in array.strides)


def _operand(session, array):
    op = Operand(dtype=DTYPE_FLOAT32)
    op.data = session.upload(array)
    for d, s in enumerate(_elements(np.ascontiguousarray(array))):
        op.strides[d] = s
    return op


def softmax_case(runtime, op, x, dim, grad=None):
    """op over `dim` of float32 x (and grad for the backward codes) through the entry."""
    session = Session(runtime)
    try:
        args = SoftmaxDimArgs(op=SOFTMAX[op], ndim=x.ndim, dim=dim, out_dtype=DTYPE_FLOAT32)
        for d, (size, stride) in enumerate(zip(x.shape, _elements(np.ascontiguousarray(x)))):
            args.sizes[d], args.out_strides[d] = size, stride
        args.out = session.upload(np.zeros(x.size, np.float32))
        args.x = _operand(session, x.astype(np.float32))
        if grad is not None:
            args.grad = _operand(session, grad.astype(np.float32))
        code = entry(runtime, "softmax_dim", SoftmaxDimArgs)(ctypes.byref(args), session.stream)
        return code, (session.download(args.out, x.shape).copy() if code == 0 else None)
    finally:
        session.close()


def nll_case(runtime, x, target, weight, reduction, ignore_index=-100, grad_output=None):
    """nll_loss of float32 x [N, C] with int64 targets; forward: (out, total_weight); backward
    (grad_output given): grad_input."""
    session = Session(runtime)
    try:
        n, c = x.shape
        args = NllLossArgs(reduction=reduction, dtype=DTYPE_FLOAT32, target_dtype=DTYPE_INT64, batch=n, classes=c,
                           spatial=1, ignore_index=ignore_index, weight_stride=1)
        args.target = session.upload(target.astype(np.int64))
        args.target_strides[0] = 1
        if weight is not None:
            args.weight = session.upload(weight.astype(np.float32))
        args.out_strides[0] = 1
        if grad_output is None:
            args.input = session.upload(x.astype(np.float32))
            args.input_strides[0], args.input_strides[1] = c, 1
            args.out = session.upload(np.zeros(n, np.float32))
            args.total_weight = session.upload(np.zeros(1, np.float32))
            code = entry(runtime, "nll_loss", NllLossArgs)(ctypes.byref(args), session.stream)
            if code:
                return code, None
            return 0, (session.download(args.out, (n if reduction == 0 else 1,)).copy(),
                       session.download(args.total_weight, (1,))[0])
        args.backward = 1
        go, total_weight = grad_output
        args.grad_output = session.upload(np.asarray(go, np.float32))
        args.total_weight = session.upload(np.asarray([total_weight], np.float32))
        args.grad_input = session.upload(np.full(n * c, 7.0, np.float32))  # every element must be written
        args.grad_input_strides[0], args.grad_input_strides[1] = c, 1
        code = entry(runtime, "nll_loss", NllLossArgs)(ctypes.byref(args), session.stream)
        return code, (session.download(args.grad_input, (n, c)).copy() if code == 0 else None)
    finally:
        session.close()


def layer_norm_case(runtime, x, weight, bias, eps, grad_out=None):
    """Forward: (out, mean, rstd); backward (grad_out given): (grad_input, grad_weight, grad_bias)."""
    session = Session(runtime)
    try:
        rows, cols = x.shape
        args = LayerNormArgs(dtype=DTYPE_FLOAT32, weight_dtype=DTYPE_FLOAT32, stats_dtype=DTYPE_FLOAT32, rows=rows,
                             cols=cols, eps=eps, x_row_stride=cols, out_row_stride=cols, grad_out_row_stride=cols,
                             grad_input_row_stride=cols)
        args.x = session.upload(x.astype(np.float32))
        args.weight = session.upload(weight.astype(np.float32))
        args.bias = session.upload(bias.astype(np.float32))
        args.mean = session.upload(np.zeros(rows, np.float32))
        args.rstd = session.upload(np.zeros(rows, np.float32))
        args.out = session.upload(np.zeros(rows * cols, np.float32))
        run = entry(runtime, "layer_norm", LayerNormArgs)
        code = run(ctypes.byref(args), session.stream)
        if code or grad_out is None:
            return code, None if code else (session.download(args.out, x.shape).copy(),
                                            session.download(args.mean, (rows,)).copy(),
                                            session.download(args.rstd, (rows,)).copy())
        args.backward = 1
        args.grad_out = session.upload(grad_out.astype(np.float32))
        args.grad_input = session.upload(np.zeros(rows * cols, np.float32))
        args.grad_weight = session.upload(np.zeros(cols, np.float32))
        args.grad_bias = session.upload(np.zeros(cols, np.float32))
        code = run(ctypes.byref(args), session.stream)
        return code, None if code else (session.download(args.grad_input, x.shape).copy(),
                                        session.download(args.grad_weight, (cols,)).copy(),
                                        session.download(args.grad_bias, (cols,)).copy())
    finally:
        session.close()


def statistics_case(runtime, op, x, dims, correction=1.0):
    """argmax/argmin (int64) or var/std (float32) of float32 x over `dims` through the reduce entry."""
    session = Session(runtime)
    try:
        arg = op in ("argmax", "argmin")
        kept_shape = [s for d, s in enumerate(x.shape) if d not in dims]
        args = ReduceArgs(op=REDUCE[op], ndim=x.ndim, in_dtype=DTYPE_FLOAT32,
                          out_dtype=DTYPE_INT64 if arg else DTYPE_FLOAT32, correction=correction)
        args.input = session.upload(x.astype(np.float32))
        args.out = session.upload(np.zeros(max(1, int(np.prod(kept_shape))), np.int64 if arg else np.float32))
        kept_strides = _elements(np.zeros(kept_shape, np.float32)) if kept_shape else ()
        j = 0
        for d in range(x.ndim):
            args.sizes[d], args.in_strides[d] = x.shape[d], _elements(np.ascontiguousarray(x))[d]
            if d in dims:
                args.reduce_mask |= 1 << d
            else:
                args.out_strides[d] = kept_strides[j]
                j += 1
        code = entry(runtime, "reduce", ReduceArgs)(ctypes.byref(args), session.stream)
        return code, (session.download(args.out, kept_shape, np.int64 if arg else np.float32).copy() if code == 0 else None)
    finally:
        session.close()


def _log_softmax(x, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


def check_entries(runtime):
    """numpy's results through each entry, and the error codes."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    g = rng.standard_normal((3, 5, 4)).astype(np.float32)
    for dim in (0, 1, 2):
        ls = _log_softmax(x, dim)
        code, got = softmax_case(runtime, "log_softmax", x, dim)
        assert code == 0, runtime.last_error_message()
        np.testing.assert_allclose(got, ls, rtol=1e-5, atol=1e-5)
        code, got = softmax_case(runtime, "softmax", x, dim)
        np.testing.assert_allclose(got, np.exp(ls), rtol=1e-5, atol=1e-6)
        code, got = softmax_case(runtime, "log_softmax_backward", ls, dim, grad=g)
        np.testing.assert_allclose(got, g - np.exp(ls) * g.sum(axis=dim, keepdims=True), rtol=1e-5, atol=1e-5)
        y = np.exp(ls)
        code, got = softmax_case(runtime, "softmax_backward", y, dim, grad=g)
        np.testing.assert_allclose(got, y * (g - (g * y).sum(axis=dim, keepdims=True)), rtol=1e-5, atol=1e-5)

    logp = _log_softmax(rng.standard_normal((6, 4)).astype(np.float32), 1)
    target = np.array([0, 3, -100, 1, 2, 3])
    weight = np.array([0.5, 1.0, 2.0, 1.5], np.float32)
    valid = target != -100
    w_t = np.where(valid, weight[np.where(valid, target, 0)], 0.0)
    loss = -w_t * logp[np.arange(6), np.where(valid, target, 0)]
    code, (out, total) = nll_case(runtime, logp, target, weight, reduction=1)
    assert code == 0, runtime.last_error_message()
    np.testing.assert_allclose(out[0], loss.sum() / w_t.sum(), rtol=1e-5)
    np.testing.assert_allclose(total, w_t.sum(), rtol=1e-6)
    code, (out, total) = nll_case(runtime, logp, target, weight, reduction=0)
    np.testing.assert_allclose(out, loss, rtol=1e-5, atol=1e-7)
    code, (out, _) = nll_case(runtime, logp, np.full(6, -100), None, reduction=1)
    assert np.isnan(out[0])  # every target ignored: 0 / 0, as ATen
    code, got = nll_case(runtime, logp, target, weight, reduction=1, grad_output=([2.0], w_t.sum()))
    assert code == 0, runtime.last_error_message()
    expected = np.zeros((6, 4), np.float32)
    expected[np.arange(6)[valid], target[valid]] = -weight[target[valid]] * 2.0 / w_t.sum()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)

    rows = rng.standard_normal((7, 33)).astype(np.float32)
    w, b, go = (rng.standard_normal(33).astype(np.float32) for _ in range(3))
    mean, var = rows.mean(1), rows.var(1)
    rstd = 1 / np.sqrt(var + 1e-5)
    xhat = (rows - mean[:, None]) * rstd[:, None]
    code, (out, got_mean, got_rstd) = layer_norm_case(runtime, rows, w, b, 1e-5)
    assert code == 0, runtime.last_error_message()
    np.testing.assert_allclose(out, xhat * w + b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_rstd, rstd, rtol=1e-4)
    gos = np.broadcast_to(go, rows.shape)
    code, (gi, gw, gb) = layer_norm_case(runtime, rows, w, b, 1e-5, grad_out=gos)
    gwx = gos * w
    np.testing.assert_allclose(gi, rstd[:, None] * (gwx - gwx.mean(1, keepdims=True) - xhat * (gwx * xhat).mean(1, keepdims=True)),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, (gos * xhat).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, gos.sum(0), rtol=1e-5, atol=1e-5)

    s = rng.standard_normal((4, 6, 5)).astype(np.float32)
    s[1, 2, 3] = np.nan
    for dims in ((1,), (0, 2), (0, 1, 2)):
        code, got = statistics_case(runtime, "argmax", s, dims)
        assert code == 0, runtime.last_error_message()
        kept = [d for d in range(3) if d not in dims]
        moved = np.moveaxis(s, list(dims), list(range(3 - len(dims), 3))).reshape([s.shape[d] for d in kept] + [-1])
        nan_first = np.where(np.isnan(moved).any(-1), np.isnan(moved).argmax(-1), np.nanargmax(moved, -1))
        np.testing.assert_array_equal(got, nan_first)
    clean = rng.standard_normal((4, 6, 5)).astype(np.float32)
    code, got = statistics_case(runtime, "argmin", clean, (2,))
    np.testing.assert_array_equal(got, clean.argmin(2))
    for correction in (0.0, 1.0, 2.5):
        code, got = statistics_case(runtime, "var", clean, (0, 2), correction)
        np.testing.assert_allclose(got, clean.var((0, 2), ddof=correction), rtol=1e-5)
        code, got = statistics_case(runtime, "std", clean, (1,), correction)
        np.testing.assert_allclose(got, clean.std(1, ddof=correction), rtol=1e-5)

    # SUM of bool and integers into int64, exact.
    session = Session(runtime)
    try:
        ints = rng.integers(-2**40, 2**40, (3, 7)).astype(np.int64)
        args = ReduceArgs(op=0, ndim=2, in_dtype=DTYPE_INT64, out_dtype=DTYPE_INT64, reduce_mask=0b10)
        args.sizes[0], args.sizes[1], args.in_strides[0], args.in_strides[1], args.out_strides[0] = 3, 7, 7, 1, 1
        args.input = session.upload(ints)
        args.out = session.upload(np.zeros(3, np.int64))
        assert entry(runtime, "reduce", ReduceArgs)(ctypes.byref(args), session.stream) == 0, runtime.last_error_message()
        np.testing.assert_array_equal(session.download(args.out, (3,), np.int64), ints.sum(1))
    finally:
        session.close()

    # Op codes the runtime does not know: NOT_SUPPORTED, nothing enqueued (the caller falls back).
    bad = SoftmaxDimArgs(op=99, ndim=1, dim=0)
    assert entry(runtime, "softmax_dim", SoftmaxDimArgs)(ctypes.byref(bad), runtime.stream(0)) == NOT_SUPPORTED
    # Malformed calls: INVALID_VALUE with a message.
    bad = SoftmaxDimArgs(op=0, ndim=2, dim=2)
    assert entry(runtime, "softmax_dim", SoftmaxDimArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    assert "dim" in runtime.last_error_message()
    bad = NllLossArgs(reduction=3, dtype=DTYPE_FLOAT32, target_dtype=DTYPE_INT64)
    assert entry(runtime, "nll_loss", NllLossArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    assert "reduction" in runtime.last_error_message()
    bad = NllLossArgs(reduction=1, dtype=DTYPE_FLOAT32, target_dtype=DTYPE_FLOAT32)
    assert entry(runtime, "nll_loss", NllLossArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    bad = LayerNormArgs(rows=-1, cols=4)
    assert entry(runtime, "layer_norm", LayerNormArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
    bad = ReduceArgs(op=REDUCE["argmax"], ndim=1, in_dtype=DTYPE_FLOAT32, out_dtype=DTYPE_FLOAT32)
    bad.sizes[0] = 3
    assert entry(runtime, "reduce", ReduceArgs)(ctypes.byref(bad), runtime.stream(0)) == INVALID_VALUE
