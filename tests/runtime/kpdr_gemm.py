"""The kernel table's ``gemm`` entry (kpdr.h's core-op section) called through ctypes.

:func:`gemm_case` uploads op(A), op(B) and C (numpy, float32 or bfloat16 storage), calls the
runtime's entry on a stream and returns the result next to numpy's float32 reference.
"""

import ctypes

import numpy as np

DTYPE_FLOAT32, DTYPE_FLOAT16, DTYPE_BFLOAT16 = 0, 1, 2
NOT_SUPPORTED, INVALID_VALUE = 8, 1


class GemmArgs(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("batch", ctypes.c_int64), ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64),
        ("trans_a", ctypes.c_int32), ("trans_b", ctypes.c_int32),
        ("a", ctypes.c_void_p), ("a_batch_stride", ctypes.c_int64), ("a_ld", ctypes.c_int64),
        ("b", ctypes.c_void_p), ("b_batch_stride", ctypes.c_int64), ("b_ld", ctypes.c_int64),
        ("c", ctypes.c_void_p), ("c_batch_stride", ctypes.c_int64), ("c_ld", ctypes.c_int64),
        ("alpha", ctypes.c_float), ("beta", ctypes.c_float),
    ]  # fmt: skip


# The entries before gemm, in kpdr.h's order.
_EARLIER_ENTRIES = ("rms_norm", "silu", "rope", "softmax", "decode_attention", "prefill_attention", "matmul_vec")


class KernelTable(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [(name, ctypes.c_void_p) for name in _EARLIER_ENTRIES] + [
        ("gemm", ctypes.c_void_p)]


def table_entry(runtime, table_type, name, args_type):
    """Entry `name` of the runtime's kernel table read as `table_type` (a ctypes mirror of
    kpdrKernelTable up to that entry), as a callable taking `args_type`; None when the runtime
    leaves it NULL or knows a shorter table."""
    table = table_type()
    table.struct_size = ctypes.sizeof(table_type)
    get = runtime.lib.kpdrGetKernels
    get.restype, get.argtypes = ctypes.c_int, [ctypes.c_void_p]
    runtime.check(get(ctypes.byref(table)))
    if table.struct_size < ctypes.sizeof(table_type) or not getattr(table, name):
        return None
    return ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(args_type), ctypes.c_void_p)(getattr(table, name))


def gemm_entry(runtime):
    """The runtime's gemm entry (a callable), or None when its table leaves it NULL."""
    return table_entry(runtime, KernelTable, "gemm", GemmArgs)


def to_bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


# dtype -> (float32 array to stored array, stored array to float32 array)
CODECS = {
    DTYPE_FLOAT32: (lambda x: np.ascontiguousarray(x, dtype=np.float32), lambda x: x),
    DTYPE_FLOAT16: (lambda x: np.ascontiguousarray(x, dtype=np.float16), lambda x: x.astype(np.float32)),
    DTYPE_BFLOAT16: (to_bf16_bits, from_bf16_bits),
}
_STORED = {DTYPE_FLOAT32: np.float32, DTYPE_FLOAT16: np.float16, DTYPE_BFLOAT16: np.uint16}


def gemm_case(runtime, *, batch, m, n, k, trans_a=0, trans_b=0, alpha=1.0, beta=0.0, dtype=DTYPE_FLOAT32,
              pad=0, broadcast_b=False, seed=0, offset=0):
    """Runs one GEMM through the entry; returns (result, reference) as float32 arrays [batch, m, n].

    ``pad`` widens every stored row (ld = row length + pad); ``broadcast_b`` stores one B
    with batch stride 0; ``offset`` starts A, B and C that many elements into their
    allocations (unaligned views).
    """
    rng = np.random.default_rng(seed)
    encode, decode = CODECS[dtype]
    a_rows, a_cols = (k, m) if trans_a else (m, k)
    b_rows, b_cols = (n, k) if trans_b else (k, n)
    b_batches = 1 if broadcast_b else batch
    a_store = rng.standard_normal((batch, a_rows, a_cols + pad)).astype(np.float32)
    b_store = rng.standard_normal((b_batches, b_rows, b_cols + pad)).astype(np.float32)
    c_store = rng.standard_normal((batch, m, n + pad)).astype(np.float32)
    a_store, b_store, c_store = (decode(encode(x)) for x in (a_store, b_store, c_store))
    a_mat = a_store[:, :, :a_cols]
    b_mat = b_store[:, :, :b_cols]
    op_a = a_mat.transpose(0, 2, 1) if trans_a else a_mat
    op_b = b_mat.transpose(0, 2, 1) if trans_b else b_mat
    reference = alpha * np.matmul(op_a, op_b) + (beta * c_store[:, :, :n] if beta != 0 else 0)

    stream = runtime.stream(0)
    buffers = {}
    keep = []
    item = 4 if dtype == DTYPE_FLOAT32 else 2
    skip = offset * item
    for name, array in (("a", a_store), ("b", b_store), ("c", c_store)):
        data = bytes(skip) + encode(array).tobytes()
        buffers[name] = runtime.malloc(0, len(data))
        keep.append(runtime.upload(buffers[name], data, stream))
    args = GemmArgs(dtype=dtype, batch=batch, m=m, n=n, k=k, trans_a=trans_a, trans_b=trans_b,
                    a=buffers["a"] + skip, a_batch_stride=a_rows * (a_cols + pad), a_ld=a_cols + pad,
                    b=buffers["b"] + skip, b_batch_stride=0 if broadcast_b else b_rows * (b_cols + pad),
                    b_ld=b_cols + pad,
                    c=buffers["c"] + skip, c_batch_stride=m * (n + pad), c_ld=n + pad, alpha=alpha, beta=beta)
    runtime.check(gemm_entry(runtime)(ctypes.byref(args), stream))
    raw = runtime.download(buffers["c"], skip + batch * m * (n + pad) * item, stream)[skip:]
    stored = np.frombuffer(raw, dtype=_STORED[dtype])
    result = decode(stored.reshape(batch, m, n + pad))[:, :, :n]
    for address in buffers.values():
        runtime.check(runtime.kpdrFree(0, ctypes.c_void_p(address)))
    return result, reference
