"""The OpenCL kpdr runtime on a real device: kernel-table bandwidth and pinned copies.

Talks to ``libkpdr_opencl.so`` through its C ABI (ctypes), so the numbers are the
runtime's own: every op is timed with kpdr events (OpenCL profiling timestamps) over
repeated launches on one stream, and compared with, in the same run,

* an OpenCL device-to-device copy moving the same number of bytes (``clEnqueueCopyBuffer``
  through kpdrMemcpyAsync): goal op/copy >= 0.70;
Each op's output is first checked against torch (on CUDA when present) at the same shape;
a wrong result is reported and makes the exit status 1.

* for 256 MiB host<->device copies from pinned memory (kpdrMallocHost), torch.cuda's pinned
  copies of the same size in the same process (when torch has CUDA): goal >= 0.80.

    python benchmarks/opencl.py [--options "platform=NVIDIA"] [--quick] [--json out.json]

Bandwidth is bytes read + written per second, GB/s (10^9 bytes). Shapes are a Llama-3-8B-like
decoder (hidden 4096, 32 heads, 8 kv heads, head_dim 128, intermediate 14336); decode attention
runs twice: 16 sequences with a 4096 cache, and one sequence with a 32768 cache. prefill_attention
is compute bound (O(seq^2) arithmetic on O(seq) bytes): its row is reported, the bandwidth goal
does not apply to it.
"""

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
GB = 1e9
MIB = 1 << 20

F32, F16, BF16 = 0, 1, 2
H2D, D2H, D2D = 1, 2, 3
DTYPES = {"fp32": (F32, torch.float32, 4), "bf16": (BF16, torch.bfloat16, 2)}

_P, _I64, _I32, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float


class RmsNormArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rows", _I64), ("cols", _I64), ("x", _P), ("x_row_stride", _I64),
                ("residual", _P), ("residual_row_stride", _I64), ("weight", _P), ("out", _P),
                ("out_row_stride", _I64), ("residual_out", _P), ("residual_out_row_stride", _I64),
                ("eps", _F), ("rstd", _P)]


class SiluArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rows", _I64), ("cols", _I64), ("x", _P), ("x_row_stride", _I64),
                ("out", _P), ("out_row_stride", _I64), ("gated", _I32)]


class RopeArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("cs_dtype", ctypes.c_int), ("batch", _I64), ("seq", _I64),
                ("heads", _I64), ("head_dim", _I64), ("x", _P), ("x_stride", _I64 * 3), ("out", _P),
                ("out_stride", _I64 * 3), ("cos", _P), ("sin", _P), ("cs_batch_stride", _I64),
                ("cs_seq_stride", _I64), ("interleaved", _I32), ("inverse", _I32)]


class SoftmaxArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rows", _I64), ("cols", _I64), ("x", _P), ("x_row_stride", _I64),
                ("out", _P), ("out_row_stride", _I64)]


class DecodeArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("batch", _I64), ("heads", _I64), ("kv_heads", _I64),
                ("cache_len", _I64), ("head_dim", _I64), ("q", _P), ("q_stride", _I64 * 2), ("k", _P),
                ("k_stride", _I64 * 3), ("v", _P), ("v_stride", _I64 * 3), ("lengths", _P), ("out", _P),
                ("out_stride", _I64 * 2), ("scale", _F)]


class PrefillArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("batch", _I64), ("heads", _I64), ("kv_heads", _I64), ("seq_q", _I64),
                ("seq_kv", _I64), ("head_dim", _I64), ("q", _P), ("q_stride", _I64 * 3), ("k", _P),
                ("k_stride", _I64 * 3), ("v", _P), ("v_stride", _I64 * 3), ("out", _P), ("out_stride", _I64 * 3),
                ("scale", _F), ("causal", _I32)]


class MatmulVecArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("n", _I64), ("k", _I64), ("w", _P), ("w_row_stride", _I64), ("x", _P),
                ("out", _P)]


_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int, _P, _P)


class KernelTable(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [
        (name, _ENTRY) for name in ("rms_norm", "silu", "rope", "softmax", "decode_attention",
                                    "prefill_attention", "matmul_vec")]


class Runtime:
    """libkpdr_opencl.so, initialised once with ``options``."""

    def __init__(self, path, options):
        self.lib = ctypes.CDLL(str(path))
        self.lib.kpdrGetLastErrorMessage.restype = ctypes.c_char_p
        self.check(self.lib.kpdrInit(options.encode()), "kpdrInit")
        self.table = KernelTable()
        self.table.struct_size = ctypes.sizeof(KernelTable)
        self.check(self.lib.kpdrGetKernels(ctypes.byref(self.table)), "kpdrGetKernels")
        self.stream = _P()
        self.check(self.lib.kpdrStreamCreate(0, 0, ctypes.byref(self.stream)), "kpdrStreamCreate")
        self.start, self.end = _P(), _P()
        self.check(self.lib.kpdrEventCreate(0, 0, ctypes.byref(self.start)), "kpdrEventCreate")
        self.check(self.lib.kpdrEventCreate(0, 0, ctypes.byref(self.end)), "kpdrEventCreate")

    def check(self, code, what):
        if code != 0:
            raise RuntimeError(f"{what} failed ({code}): {self.lib.kpdrGetLastErrorMessage().decode()}")

    def name(self):
        class Props(ctypes.Structure):
            _fields_ = [("name", ctypes.c_char * 256), ("total_memory", ctypes.c_uint64),
                        ("compute_units", ctypes.c_int32), ("host_addressable", ctypes.c_int32),
                        ("reserved", ctypes.c_int32 * 16)]
        props = Props()
        self.check(self.lib.kpdrGetDeviceProperties(0, ctypes.byref(props)), "kpdrGetDeviceProperties")
        return props.name.decode()

    def malloc(self, nbytes):
        ptr = _P()
        self.check(self.lib.kpdrMalloc(0, ctypes.byref(ptr), nbytes), "kpdrMalloc")
        return ptr.value

    def free(self, ptr):
        self.check(self.lib.kpdrFree(0, _P(ptr)), "kpdrFree")

    def upload(self, tensor):
        """A device copy of a CPU tensor; returns the device address."""
        tensor = tensor.contiguous()
        nbytes = tensor.numel() * tensor.element_size()
        ptr = self.malloc(nbytes)
        self.check(self.lib.kpdrMemcpyAsync(_P(ptr), _P(tensor.data_ptr()), nbytes, H2D, self.stream), "upload")
        self.sync()
        return ptr

    def sync(self):
        self.check(self.lib.kpdrStreamSynchronize(self.stream), "kpdrStreamSynchronize")

    def time_ms(self, launch, iterations):
        """Mean milliseconds of ``launch()`` over ``iterations`` back-to-back launches."""
        launch()
        self.sync()
        self.check(self.lib.kpdrEventRecord(self.start, self.stream), "kpdrEventRecord")
        for _ in range(iterations):
            launch()
        self.check(self.lib.kpdrEventRecord(self.end, self.stream), "kpdrEventRecord")
        self.check(self.lib.kpdrEventSynchronize(self.end), "kpdrEventSynchronize")
        ms = ctypes.c_float()
        self.check(self.lib.kpdrEventElapsedTime(ctypes.byref(ms), self.start, self.end), "kpdrEventElapsedTime")
        return ms.value / iterations

    def copy_ms(self, nbytes, iterations):
        """A device-to-device copy of ``nbytes`` (moves 2 * nbytes): the median of three timings.

        One timing alone was seen to be a 4x outlier on the H100 (the run's first copy,
        603 GB/s against about 2500), which made that op's ratio meaningless.
        """
        src, dst = self.malloc(nbytes), self.malloc(nbytes)
        try:
            rounds = sorted(self.time_ms(lambda: self.check(
                self.lib.kpdrMemcpyAsync(_P(dst), _P(src), nbytes, D2D, self.stream), "copy"), iterations)
                for _ in range(3))
            return rounds[1]
        finally:
            self.free(src)
            self.free(dst)


def _ref_device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def kernel_cases(dtype_name, shrink=1):
    """(name, build) pairs; build(rt) returns (launch, bytes moved, buffers to free, output
    address, output shape, reference) where reference() is the expected output (float32, CPU)
    computed by torch from the same inputs.

    ``shrink`` divides the token/sequence dimensions (a smoke run on a CPU device)."""
    code, torch_dtype, size = DTYPES[dtype_name]
    T = 4096 // shrink  # tokens / rows

    def rand(*shape):
        return torch.randn(*shape).to(torch_dtype)

    def ref(t):  # the input as torch computes it: float32 on the reference device
        return t.to(_ref_device()).float()

    def run(rt, name):
        return lambda args: rt.check(getattr(rt.table, name)(ctypes.addressof(args), rt.stream.value), name)

    def rms_norm(rt, residual):
        rows, cols = T, 4096
        xh, rh, wh = rand(rows, cols), rand(rows, cols), rand(cols)
        x, r, w = rt.upload(xh), rt.upload(rh), rt.upload(wh)
        out, ro = rt.malloc(rows * cols * size), rt.malloc(rows * cols * size)
        args = RmsNormArgs(code, rows, cols, x, cols, r if residual else None, cols, w, out, cols,
                           ro if residual else None, cols, 1e-6, None)
        moved = rows * cols * size * (4 if residual else 2)

        def expected():
            src = (ref(xh) + ref(rh)).to(torch_dtype).float() if residual else ref(xh)
            return src * torch.rsqrt(src.pow(2).mean(-1, keepdim=True) + 1e-6) * ref(wh)
        return lambda: run(rt, "rms_norm")(args), moved, [x, r, w, out, ro], out, (rows, cols), expected

    def silu_and_mul(rt):
        rows, cols = T, 14336
        xh = rand(rows, 2 * cols)
        x, out = rt.upload(xh), rt.malloc(rows * cols * size)
        args = SiluArgs(code, rows, cols, x, 2 * cols, out, cols, 1)
        expected = lambda: torch.nn.functional.silu(ref(xh[:, :cols])) * ref(xh[:, cols:])
        return lambda: run(rt, "silu")(args), rows * cols * size * 3, [x, out], out, (rows, cols), expected

    def rope(rt):
        b, s, h, d = 1, T, 32, 128
        xh, ch, sh = rand(b, s, h, d), rand(s, d // 2), rand(s, d // 2)
        x, out, cos, sin = rt.upload(xh), rt.malloc(b * s * h * d * size), rt.upload(ch), rt.upload(sh)
        st = (s * h * d, h * d, d)
        args = RopeArgs(code, code, b, s, h, d, x, (_I64 * 3)(*st), out, (_I64 * 3)(*st), cos, sin, 0, d // 2, 0, 0)

        def expected():
            x1, x2 = ref(xh[..., : d // 2]), ref(xh[..., d // 2:])
            c, sn = ref(ch)[None, :, None, :], ref(sh)[None, :, None, :]
            return torch.cat([x1 * c - x2 * sn, x1 * sn + x2 * c], -1)
        return lambda: run(rt, "rope")(args), 2 * b * s * h * d * size, [x, out, cos, sin], out, (b, s, h, d), expected

    def softmax(rt):
        rows, cols = T, 4096
        xh = rand(rows, cols)
        x, out = rt.upload(xh), rt.malloc(rows * cols * size)
        args = SoftmaxArgs(code, rows, cols, x, cols, out, cols)
        expected = lambda: torch.softmax(ref(xh), -1)
        return lambda: run(rt, "softmax")(args), 2 * rows * cols * size, [x, out], out, (rows, cols), expected

    def decode(rt, b=16, t=T):
        h, kvh, d = 32, 8, 128
        qh, kh, vh = rand(b, h, d), rand(b, kvh, t, d), rand(b, kvh, t, d)
        q, out, k, v = rt.upload(qh), rt.malloc(b * h * d * size), rt.upload(kh), rt.upload(vh)
        kst = (kvh * t * d, t * d, d)
        args = DecodeArgs(code, b, h, kvh, t, d, q, (_I64 * 2)(h * d, d), k, (_I64 * 3)(*kst), v, (_I64 * 3)(*kst),
                          None, out, (_I64 * 2)(h * d, d), d ** -0.5)

        def expected():
            kk, vv = ref(kh).repeat_interleave(h // kvh, 1), ref(vh).repeat_interleave(h // kvh, 1)
            return torch.nn.functional.scaled_dot_product_attention(ref(qh)[:, :, None], kk, vv)[:, :, 0]
        return (lambda: run(rt, "decode_attention")(args), 2 * b * kvh * t * d * size, [q, out, k, v], out, (b, h, d),
                expected)

    def prefill(rt):
        b, h, kvh, s, d = 1, 32, 8, T // 2, 128
        qh, kh, vh = rand(b, h, s, d), rand(b, kvh, s, d), rand(b, kvh, s, d)
        q, out, k, v = rt.upload(qh), rt.malloc(b * h * s * d * size), rt.upload(kh), rt.upload(vh)
        qs, ks = (h * s * d, s * d, d), (kvh * s * d, s * d, d)
        args = PrefillArgs(code, b, h, kvh, s, s, d, q, (_I64 * 3)(*qs), k, (_I64 * 3)(*ks), v, (_I64 * 3)(*ks),
                           out, (_I64 * 3)(*qs), d ** -0.5, 1)

        def expected():
            kk, vv = ref(kh).repeat_interleave(h // kvh, 1), ref(vh).repeat_interleave(h // kvh, 1)
            return torch.nn.functional.scaled_dot_product_attention(ref(qh), kk, vv, is_causal=True)
        return (lambda: run(rt, "prefill_attention")(args), (2 * b * h * s * d + 2 * b * kvh * s * d) * size,
                [q, out, k, v], out, (b, h, s, d), expected)

    def matmul_vec(rt):
        n, k = 14336 // shrink, 4096
        wh, xh = rand(n, k), rand(k)
        w, x, out = rt.upload(wh), rt.upload(xh), rt.malloc(n * size)
        args = MatmulVecArgs(code, n, k, w, k, x, out)
        expected = lambda: ref(wh) @ ref(xh)
        return lambda: run(rt, "matmul_vec")(args), n * k * size, [w, x, out], out, (n,), expected

    return [("rms_norm", lambda rt: rms_norm(rt, False)), ("fused_add_rms_norm", lambda rt: rms_norm(rt, True)),
            ("silu_and_mul", silu_and_mul), ("rope", rope), ("softmax", softmax), ("decode_attention", decode),
            # one sequence, a long cache: only the split over the cache can fill the device
            ("decode_attention_b1", lambda rt: decode(rt, 1, 32768 // shrink)),
            ("prefill_attention", prefill), ("matmul_vec", matmul_vec)]


def check_output(rt, out, shape, torch_dtype, expected):
    """Largest error of the device output against torch, relative to the output's scale."""
    result = torch.empty(shape, dtype=torch_dtype)
    nbytes = result.numel() * result.element_size()
    rt.check(rt.lib.kpdrMemcpyAsync(_P(result.data_ptr()), _P(out), nbytes, D2H, rt.stream), "download")
    rt.sync()
    want = expected().cpu()
    return ((result.float() - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()


def pinned_copies(rt, iterations):
    """256 MiB host<->device from kpdrMallocHost memory, and torch.cuda's pinned copies."""
    nbytes = 256 * MIB
    host = _P()
    rt.check(rt.lib.kpdrMallocHost(ctypes.byref(host), nbytes), "kpdrMallocHost")
    dev = rt.malloc(nbytes)
    ctypes.memset(host, 1, nbytes)
    results = {}
    results["opencl_h2d_gbps"] = nbytes / GB / (rt.time_ms(lambda: rt.check(rt.lib.kpdrMemcpyAsync(
        _P(dev), host, nbytes, H2D, rt.stream), "h2d"), iterations) / 1e3)
    results["opencl_d2h_gbps"] = nbytes / GB / (rt.time_ms(lambda: rt.check(rt.lib.kpdrMemcpyAsync(
        host, _P(dev), nbytes, D2H, rt.stream), "d2h"), iterations) / 1e3)
    rt.free(dev)
    rt.check(rt.lib.kpdrFreeHost(host), "kpdrFreeHost")
    if torch.cuda.is_available():
        pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        gpu = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

        def cuda_gbps(fn):
            fn()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iterations):
                fn()
            end.record()
            end.synchronize()
            return nbytes / GB / (start.elapsed_time(end) / iterations / 1e3)

        results["cuda_h2d_gbps"] = cuda_gbps(lambda: gpu.copy_(pinned, non_blocking=True))
        results["cuda_d2h_gbps"] = cuda_gbps(lambda: pinned.copy_(gpu, non_blocking=True))
        results["h2d_ratio"] = results["opencl_h2d_gbps"] / results["cuda_h2d_gbps"]
        results["d2h_ratio"] = results["opencl_d2h_gbps"] / results["cuda_d2h_gbps"]
        results["goal"] = 0.8
        results["meets_goal"] = min(results["h2d_ratio"], results["d2h_ratio"]) >= 0.8
    else:
        results["cuda"] = "torch has no CUDA device here: no side-by-side pinned-copy baseline"
    return results


def progress(done, total, label):
    width = 30
    filled = int(width * done / total)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label:<32}")
    sys.stderr.flush()
    if done == total:
        sys.stderr.write("\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=str(REPO_ROOT / "kernel_pytorch" / "lib" / "libkpdr_opencl.so"))
    parser.add_argument("--options", default=os.environ.get("MY_ASIC_RUNTIME_OPTIONS", ""),
                        help="kpdrInit options, e.g. platform=NVIDIA")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--shrink", type=int, default=1,
                        help="divide token/sequence sizes by this (smoke runs on CPU devices such as PoCL)")
    parser.add_argument("--ops", help="only these ops (comma separated, e.g. decode_attention,decode_attention_b1); "
                                      "the pinned copies run only without --ops")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma separated: " + ", ".join(DTYPES))
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)

    rt = Runtime(args.library, args.options)
    iterations = 3 if args.quick else 20
    report = {"device": rt.name(), "options": args.options, "shrink": args.shrink, "kernels": [], "copy_goal": 0.7}
    dtypes = args.dtypes.split(",")
    unknown = [d for d in dtypes if d not in DTYPES]
    names = {name for name, _ in kernel_cases("fp32")}
    wanted = set(args.ops.split(",")) if args.ops else names
    if unknown or wanted - names:
        parser.error(f"unknown dtype or op: {sorted(set(unknown) | (wanted - names))}; ops are {sorted(names)}")
    cases = [(d, name, build) for d in dtypes for name, build in kernel_cases(d, args.shrink) if name in wanted]
    total = len(cases) + (0 if args.ops else 1)
    for i, (dtype_name, name, build) in enumerate(cases):
        progress(i, total, f"{name} {dtype_name}")
        launch, moved, buffers, out, shape, expected = build(rt)
        launch()
        error = check_output(rt, out, shape, DTYPES[dtype_name][1], expected)
        op_ms = rt.time_ms(launch, iterations)
        copy_ms = rt.copy_ms(moved // 2, iterations)
        for ptr in buffers:
            rt.free(ptr)
        op_gbps, copy_gbps = moved / GB / (op_ms / 1e3), moved / GB / (copy_ms / 1e3)
        row = {"op": name, "dtype": dtype_name, "bytes": moved, "op_ms": round(op_ms, 4),
               "op_gbps": round(op_gbps, 1), "copy_gbps": round(copy_gbps, 1),
               "ratio": round(op_gbps / copy_gbps, 3), "max_rel_error": float(f"{error:.2e}"),
               "correct": error <= (1e-3 if dtype_name == "fp32" else 2e-2)}
        if name == "prefill_attention":
            row["note"] = "compute bound: the bandwidth goal does not apply"
        else:
            row["meets_goal"] = row["ratio"] >= 0.7
        report["kernels"].append(row)
    if not args.ops:
        progress(len(cases), total, "pinned copies 256 MiB")
        report["pinned_copies"] = pinned_copies(rt, 5 if args.quick else 10)
    progress(total, total, "done")
    print(f"device: {report['device']}")
    print(f"{'op':<20}{'dtype':<6}{'op ms':>9}{'op GB/s':>10}{'copy GB/s':>11}{'ratio':>8}{'error':>10}  goal >= 0.70")
    for row in report["kernels"]:
        verdict = row.get("note") or ("ok" if row["meets_goal"] else "MISSED")
        if not row["correct"]:
            verdict = "WRONG RESULT; " + verdict
        print(f"{row['op']:<20}{row['dtype']:<6}{row['op_ms']:>9.3f}{row['op_gbps']:>10.1f}{row['copy_gbps']:>11.1f}"
              f"{row['ratio']:>8.2f}{row['max_rel_error']:>10.1e}  {verdict}")
    if "pinned_copies" in report:
        print("pinned copies:", json.dumps(report["pinned_copies"]))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if all(row["correct"] for row in report["kernels"]) else 1


if __name__ == "__main__":
    sys.exit(main())
