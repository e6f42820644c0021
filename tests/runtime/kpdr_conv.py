"""The kernel table's ``im2col`` and ``max_pool2d`` entries (kpdr.h's core-op section) through ctypes.

:func:`check_entries` runs the checks every runtime's tests share: numpy references (ATen's
definitions: F.unfold / F.fold, max_pool2d with indices) for strided images, both column
layouts the convolution glue uses, float32 and bfloat16 storage, and the error codes.
"""

import ctypes

import numpy as np

from kpdr_gemm import from_bf16_bits, to_bf16_bits, table_entry
from kpdr_losses import KernelTable as _LossesTable
from kpdr_pointwise import Session

DTYPE_FLOAT32, DTYPE_BFLOAT16 = 0, 2
NOT_SUPPORTED, INVALID_VALUE = 8, 1
IM2COL, COL2IM = 0, 1
FORWARD, BACKWARD = 0, 1

Pair = ctypes.c_int64 * 2
Four = ctypes.c_int64 * 4


class Window2d(ctypes.Structure):
    _fields_ = [("kernel", Pair), ("stride", Pair), ("padding", Pair), ("dilation", Pair)]


_GEOMETRY = [(name, ctypes.c_int64) for name in ("batch", "channels", "height", "width", "out_h", "out_w")]


class Im2colArgs(ctypes.Structure):
    _fields_ = [("direction", ctypes.c_int32), ("dtype", ctypes.c_int)] + _GEOMETRY + [
        ("window", Window2d), ("image", ctypes.c_void_p), ("image_strides", Four),
        ("col", ctypes.c_void_p), ("col_batch_stride", ctypes.c_int64), ("col_ld", ctypes.c_int64)]


class MaxPool2dArgs(ctypes.Structure):
    _fields_ = [("direction", ctypes.c_int32), ("dtype", ctypes.c_int)] + _GEOMETRY + [
        ("window", Window2d), ("input", ctypes.c_void_p), ("input_strides", Four),
        ("out", ctypes.c_void_p), ("out_strides", Four), ("indices", ctypes.c_void_p), ("indices_strides", Four)]


class KernelTable(_LossesTable):  # kpdr.h's order: the losses' entries come first
    _fields_ = [("im2col", ctypes.c_void_p), ("max_pool2d", ctypes.c_void_p)]


def entry(runtime, name, args_type):
    """The runtime's entry `name` (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, name, args_type)


def out_size(size, k, s, p, d, ceil=False):
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def im2col_reference(x, k, s, p, d):
    """F.unfold: [N, C * kh * kw, OH * OW]."""
    n, c, h, w = x.shape
    oh, ow = out_size(h, k[0], s[0], p[0], d[0]), out_size(w, k[1], s[1], p[1], d[1])
    padded = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    col = np.empty((n, c, k[0], k[1], oh, ow), dtype=np.float32)
    for i in range(k[0]):
        for j in range(k[1]):
            col[:, :, i, j] = padded[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                                     j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
    return col.reshape(n, c * k[0] * k[1], oh * ow)


def col2im_reference(col, shape, k, s, p, d):
    """F.fold: each pixel the sum of the columns that read it."""
    n, c, h, w = shape
    oh, ow = out_size(h, k[0], s[0], p[0], d[0]), out_size(w, k[1], s[1], p[1], d[1])
    padded = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]), dtype=np.float32)
    col = col.reshape(n, c, k[0], k[1], oh, ow)
    for i in range(k[0]):
        for j in range(k[1]):
            padded[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                   j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]] += col[:, :, i, j]
    return padded[:, :, p[0]:p[0] + h, p[1]:p[1] + w]


def max_pool_reference(x, k, s, p, d, oh, ow):
    """ATen's max_pool2d_with_indices: first maximum in window order, NaN wins."""
    n, c, h, w = x.shape
    out = np.empty((n, c, oh, ow), np.float32)
    idx = np.empty((n, c, oh, ow), np.int64)
    for b in range(n):
        for ch in range(c):
            for y in range(oh):
                for z in range(ow):
                    best, where = -np.inf, -1
                    for i in range(k[0]):
                        hh = y * s[0] - p[0] + i * d[0]
                        if not 0 <= hh < h:
                            continue
                        for j in range(k[1]):
                            ww = z * s[1] - p[1] + j * d[1]
                            if not 0 <= ww < w:
                                continue
                            v = x[b, ch, hh, ww]
                            if where < 0:
                                where = hh * w + ww
                            if v > best or np.isnan(v):
                                best, where = v, hh * w + ww
                    out[b, ch, y, z], idx[b, ch, y, z] = best, where
    return out, idx


def _store(x, dtype):
    return np.ascontiguousarray(x, np.float32) if dtype == DTYPE_FLOAT32 else to_bf16_bits(x)


def _load(raw, dtype, shape):
    if dtype == DTYPE_FLOAT32:
        return np.frombuffer(raw, np.float32).reshape(shape)
    return from_bf16_bits(np.frombuffer(raw, np.uint16)).reshape(shape)


def _round(x, dtype):
    return x if dtype == DTYPE_FLOAT32 else from_bf16_bits(to_bf16_bits(x)).reshape(x.shape)


def _window(k, s, p, d):
    return Window2d(Pair(*k), Pair(*s), Pair(*p), Pair(*d))


def _image_strides(shape, channels_last):
    """Element strides of an [N, C, H, W] image stored contiguous or channels-last (NHWC)."""
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c) if channels_last else (c * h * w, h * w, w, 1)


def _to_storage(x, channels_last):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1) if channels_last else x)


def _from_storage(stored, shape, channels_last):
    n, c, h, w = shape
    return stored.reshape(n, h, w, c).transpose(0, 3, 1, 2) if channels_last else stored.reshape(shape)


def im2col_case(runtime, shape, k, s, p, d, *, dtype=DTYPE_FLOAT32, channels_last=False, side_by_side=False,
                seed=0):
    """Runs im2col then col2im through the entry; returns ((col, col_ref), (image, image_ref)).

    ``side_by_side`` lays the images' columns out as [rows, N * positions] (batch stride =
    positions), as the convolution's weight gradient reads them; else [N, rows, positions].
    """
    rng = np.random.default_rng(seed)
    x = _round(rng.standard_normal(shape).astype(np.float32), dtype)
    n, c, h, w = shape
    oh, ow = out_size(h, k[0], s[0], p[0], d[0]), out_size(w, k[1], s[1], p[1], d[1])
    rows, positions = c * k[0] * k[1], oh * ow
    batch_stride, ld = (positions, n * positions) if side_by_side else (rows * positions, positions)
    session = Session(runtime)
    try:
        item = 4 if dtype == DTYPE_FLOAT32 else 2
        image = session.upload(_store(_to_storage(x, channels_last), dtype))
        col = session.upload(np.zeros(n * rows * positions * item, np.uint8))
        args = Im2colArgs(direction=IM2COL, dtype=dtype, batch=n, channels=c, height=h, width=w, out_h=oh, out_w=ow,
                          window=_window(k, s, p, d), image=image, image_strides=Four(*_image_strides(shape, channels_last)),
                          col=col, col_batch_stride=batch_stride, col_ld=ld)
        runtime.check(entry(runtime, "im2col", Im2colArgs)(ctypes.byref(args), session.stream))
        stored = _load(session.download(col, (n * rows * positions * item,), np.uint8).tobytes(), dtype, (-1,))
        if side_by_side:
            got_col = stored.reshape(rows, n, positions).transpose(1, 0, 2)
        else:
            got_col = stored.reshape(n, rows, positions)
        # col2im of the same columns into a fresh image (written whole: start from garbage).
        out_image = session.upload(np.full(n * c * h * w * item, 0x7F, np.uint8))
        args.direction, args.image = COL2IM, out_image
        runtime.check(entry(runtime, "im2col", Im2colArgs)(ctypes.byref(args), session.stream))
        raw = session.download(out_image, (n * c * h * w * item,), np.uint8).tobytes()
        got_image = _from_storage(_load(raw, dtype, (-1,)), shape, channels_last)
        ref_col = im2col_reference(x, k, s, p, d)
        return (got_col, ref_col), (got_image, col2im_reference(_round(ref_col, dtype), shape, k, s, p, d))
    finally:
        session.close()


def max_pool_case(runtime, shape, k, s, p, d, *, ceil=False, dtype=DTYPE_FLOAT32, channels_last=False, x=None,
                  seed=0):
    """Forward then backward through the entry; returns ((out, idx), (out_ref, idx_ref), (grad, grad_ref))."""
    rng = np.random.default_rng(seed)
    if x is None:
        x = rng.standard_normal(shape).astype(np.float32)
    x = _round(x, dtype)
    n, c, h, w = shape
    oh, ow = out_size(h, k[0], s[0], p[0], d[0], ceil), out_size(w, k[1], s[1], p[1], d[1], ceil)
    out_shape = (n, c, oh, ow)
    item = 4 if dtype == DTYPE_FLOAT32 else 2
    session = Session(runtime)
    try:
        xin = session.upload(_store(_to_storage(x, channels_last), dtype))
        out = session.upload(np.zeros(n * c * oh * ow * item, np.uint8))
        idx = session.upload(np.zeros(n * c * oh * ow, np.int64))
        strides = Four(*_image_strides(out_shape, channels_last))
        args = MaxPool2dArgs(direction=FORWARD, dtype=dtype, batch=n, channels=c, height=h, width=w, out_h=oh,
                             out_w=ow, window=_window(k, s, p, d), input=xin,
                             input_strides=Four(*_image_strides(shape, channels_last)),
                             out=out, out_strides=strides, indices=idx, indices_strides=strides)
        runtime.check(entry(runtime, "max_pool2d", MaxPool2dArgs)(ctypes.byref(args), session.stream))
        got_out = _from_storage(_load(session.download(out, (n * c * oh * ow * item,), np.uint8).tobytes(), dtype,
                                      (-1,)), out_shape, channels_last)
        got_idx = _from_storage(session.download(idx, (n * c * oh * ow,), np.int64), out_shape, channels_last)
        ref_out, ref_idx = max_pool_reference(x, k, s, p, d, oh, ow)
        # Backward: grad_output through the same indices (the reference's, so a forward bug shows once).
        g = _round(rng.standard_normal(out_shape).astype(np.float32), dtype)
        grad_out = session.upload(_store(_to_storage(g, channels_last), dtype))
        ref_idx_buffer = session.upload(_to_storage(ref_idx, channels_last))
        grad_in = session.upload(np.full(n * c * h * w * item, 0x7F, np.uint8))
        args.direction, args.input, args.out, args.indices = BACKWARD, grad_in, grad_out, ref_idx_buffer
        runtime.check(entry(runtime, "max_pool2d", MaxPool2dArgs)(ctypes.byref(args), session.stream))
        raw = session.download(grad_in, (n * c * h * w * item,), np.uint8).tobytes()
        got_grad = _from_storage(_load(raw, dtype, (-1,)), shape, channels_last)
        ref_grad = np.zeros((n, c, h * w), np.float32)
        for b in range(n):
            for ch in range(c):
                np.add.at(ref_grad[b, ch], ref_idx[b, ch].reshape(-1), g[b, ch].reshape(-1))
        return (got_out, got_idx), (ref_out, ref_idx), (got_grad, ref_grad.reshape(shape))
    finally:
        session.close()


IM2COL_CASES = [
    dict(shape=(2, 3, 7, 6), k=(3, 3), s=(1, 1), p=(1, 1), d=(1, 1)),
    dict(shape=(2, 4, 9, 8), k=(3, 2), s=(2, 1), p=(1, 0), d=(2, 1), channels_last=True),
    dict(shape=(3, 2, 1, 11), k=(1, 3), s=(1, 2), p=(0, 2), d=(1, 1), side_by_side=True),  # a 1-D window
    dict(shape=(2, 3, 8, 8), k=(2, 2), s=(2, 2), p=(0, 0), d=(1, 1), side_by_side=True, channels_last=True),
]
POOL_CASES = [
    dict(shape=(2, 3, 8, 8), k=(2, 2), s=(2, 2), p=(0, 0), d=(1, 1)),
    dict(shape=(2, 3, 9, 7), k=(3, 3), s=(2, 1), p=(1, 1), d=(1, 2), channels_last=True),  # overlapping windows
    dict(shape=(1, 2, 7, 7), k=(3, 2), s=(2, 2), p=(1, 1), d=(1, 1), ceil=True),
]
TOLERANCE = {DTYPE_FLOAT32: dict(rtol=1e-6, atol=1e-6), DTYPE_BFLOAT16: dict(rtol=1e-2, atol=2e-2)}


def check_entries(runtime, dtypes=(DTYPE_FLOAT32, DTYPE_BFLOAT16)):
    """numpy's results for every case and dtype, then the error codes."""
    for dtype in dtypes:
        for case in IM2COL_CASES:
            (col, col_ref), (image, image_ref) = im2col_case(runtime, dtype=dtype, **case)
            np.testing.assert_array_equal(col, _round(col_ref, dtype), err_msg=f"im2col {case}")
            np.testing.assert_allclose(image, image_ref, **TOLERANCE[dtype], err_msg=f"col2im {case}")
        for case in POOL_CASES:
            (out, idx), (out_ref, idx_ref), (grad, grad_ref) = max_pool_case(runtime, dtype=dtype, **case)
            np.testing.assert_array_equal(out, out_ref, err_msg=f"max_pool2d {case}")
            np.testing.assert_array_equal(idx, idx_ref, err_msg=f"max_pool2d indices {case}")
            np.testing.assert_allclose(grad, grad_ref, **TOLERANCE[dtype], err_msg=f"max_pool2d backward {case}")
    # Ties keep the first pixel, NaN wins, a window of -inf keeps its first pixel.
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 2], x[0, 0, 3, 3] = np.nan, -np.inf
    x[0, 0, 2:, :2] = -np.inf
    (out, idx), (out_ref, idx_ref), _ = max_pool_case(runtime, (1, 1, 4, 4), (2, 2), (2, 2), (0, 0), (1, 1), x=x)
    np.testing.assert_array_equal(idx, idx_ref)
    np.testing.assert_array_equal(idx.reshape(-1), [0, 2, 8, 10])
    assert np.isnan(out[0, 0, 0, 1]) and out[0, 0, 1, 0] == -np.inf
    # A direction the runtime does not know: NOT_SUPPORTED, nothing enqueued.
    stream = runtime.stream(0)
    bad = Im2colArgs(direction=7, window=_window((1, 1), (1, 1), (0, 0), (1, 1)))
    assert entry(runtime, "im2col", Im2colArgs)(ctypes.byref(bad), stream) == NOT_SUPPORTED
    bad = MaxPool2dArgs(direction=7, window=_window((1, 1), (1, 1), (0, 0), (1, 1)))
    assert entry(runtime, "max_pool2d", MaxPool2dArgs)(ctypes.byref(bad), stream) == NOT_SUPPORTED
    # Malformed calls: INVALID_VALUE with a message.
    bad = Im2colArgs(direction=IM2COL, batch=1, channels=1, height=2, width=2, out_h=2, out_w=2, col_ld=4,
                     window=_window((1, 1), (1, 1), (-1, 0), (1, 1)))
    assert entry(runtime, "im2col", Im2colArgs)(ctypes.byref(bad), stream) == INVALID_VALUE
    assert "padding" in runtime.last_error_message()
    bad = MaxPool2dArgs(direction=FORWARD, batch=-1, window=_window((1, 1), (1, 1), (0, 0), (1, 1)))
    assert entry(runtime, "max_pool2d", MaxPool2dArgs)(ctypes.byref(bad), stream) == INVALID_VALUE
    assert "negative size" in runtime.last_error_message()
