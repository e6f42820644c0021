"""The OpenCL runtime's core ops on a real device: GEMM, pointwise, reductions, a training step.

Three parts, each measured side by side in one run (issue 18's targets):

* ``gemm``: 4096^3 GEMM through the kernel table's ``gemm`` entry (ctypes, timed with kpdr
  events) in float32, bfloat16 and float16, against torch.cuda's cuBLAS at the same shape in
  the same process (TF32 off for float32). Goals: float32 >= 0.50 of cuBLAS, 16-bit >= 0.25.
  The 16-bit rows run twice: the portable kernel (``gemm=portable``) and the tensor-core
  kernel (``gemm=mma``, inline PTX on NVIDIA), each in its own copy of the runtime library;
  a tensor-core build failure is reported with the compiler's message. Every result is
  checked against torch (float32 on CUDA or the CPU).
* ``bandwidth``: pointwise (add, mul, gelu, silu, where) and reductions (sum over rows, over
  columns, amax) of 64 MiB operands through the ``pointwise`` and ``reduce`` entries, as a
  fraction of an OpenCL device-to-device copy's bandwidth (bytes read + written per second).
  Goal >= 0.70.
  The launch floor (microseconds per call of a 16 KiB add and row sum) is reported beside
  them: a 64 MiB op that takes little more than it is bound by launch costs, not bandwidth.
* ``train``: one training step (forward, backward, AdamW) of a tiny Hugging Face Llama
  (LlamaConfig, random weights; batch 8, sequence 512) on my_asic over the OpenCL runtime,
  on torch.cuda eager, and on the machine's CPU, each in its own process (torch's CUDA
  autograd asserts with my_asic registered beside CUDA: pytorch issue 161129, so the CUDA
  process runs without MY_ASIC_ENABLE). Goals: OpenCL >= 0.4x CUDA's speed and >= 3x the
  CPU's. The ops that fell back to the CPU during the my_asic steps are listed.

    python benchmarks/opencl_core.py [--parts gemm,bandwidth,train] [--options "platform=NVIDIA"]
                                     [--quick] [--json out.json]
                                     [--mma-variant "NAME=-DKP_MMA_BK=32 -DKP_MMA_STAGES=3" ...]

``--mma-variant`` adds 16-bit rows of the tensor-core kernel built with other shape macros
(gemm_source.cpp), each in its own copy of the library, timed on A·B beside the default.

TFLOPS are 10^12 floating-point operations (2 m n k per GEMM) per second; GB/s are 10^9 bytes
per second; 64 MiB is 2^26 bytes per operand.
"""

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from opencl import D2H, H2D, Runtime, progress  # noqa: E402

GB = 1e9
MIB = 1 << 20
F32, F16, BF16 = 0, 1, 2
TORCH = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}
NAMES = {F32: "fp32", F16: "fp16", BF16: "bf16"}
_P, _I64, _I32, _F, _D = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_float, ctypes.c_double
_DIMS = _I64 * 8


class GemmArgs(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("batch", _I64), ("m", _I64), ("n", _I64), ("k", _I64),
                ("trans_a", _I32), ("trans_b", _I32), ("a", _P), ("a_batch_stride", _I64), ("a_ld", _I64),
                ("b", _P), ("b_batch_stride", _I64), ("b_ld", _I64), ("c", _P), ("c_batch_stride", _I64),
                ("c_ld", _I64), ("alpha", _F), ("beta", _F)]


class Operand(ctypes.Structure):
    _fields_ = [("data", _P), ("dtype", ctypes.c_int), ("strides", _DIMS), ("value", _D)]


class PointwiseArgs(ctypes.Structure):
    _fields_ = [("op", _I32), ("ndim", _I32), ("sizes", _DIMS), ("out", _P), ("out_dtype", ctypes.c_int),
                ("out_strides", _DIMS), ("inputs", Operand * 3), ("alpha", _D)]


class ReduceArgs(ctypes.Structure):
    _fields_ = [("op", _I32), ("ndim", _I32), ("sizes", _DIMS), ("reduce_mask", ctypes.c_uint32),
                ("input", _P), ("in_dtype", ctypes.c_int), ("in_strides", _DIMS), ("out", _P),
                ("out_dtype", ctypes.c_int), ("out_strides", _DIMS)]


class CoreTable(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32)] + [
        (name, _P) for name in ("rms_norm", "silu", "rope", "softmax", "decode_attention", "prefill_attention",
                                "matmul_vec", "gemm", "pointwise", "reduce")]


def core_entries(rt):
    """{name: callable} of the gemm, pointwise and reduce entries of ``rt``."""
    table = CoreTable()
    table.struct_size = ctypes.sizeof(CoreTable)
    rt.check(rt.lib.kpdrGetKernels(ctypes.byref(table)), "kpdrGetKernels")
    out = {}
    for name, args in (("gemm", GemmArgs), ("pointwise", PointwiseArgs), ("reduce", ReduceArgs)):
        address = getattr(table, name) if table.struct_size >= ctypes.sizeof(CoreTable) else None
        if address:
            out[name] = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(args), _P)(address)
    return out


def load_runtime(library, options, tag):
    """A runtime from its own copy of the library (kpdrInit configures a loaded copy once)."""
    copy = Path(tempfile.mkdtemp(prefix="kp-bench-")) / f"libkpdr_opencl-{tag}.so"
    shutil.copyfile(library, copy)
    return Runtime(copy, options)


def download(rt, ptr, shape, dtype):
    out = torch.empty(shape, dtype=dtype)
    rt.check(rt.lib.kpdrMemcpyAsync(_P(out.data_ptr()), _P(ptr), out.numel() * out.element_size(), D2H,
                                    rt.stream), "download")
    rt.sync()
    return out


def reference_device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def cuda_ms(fn, iterations):
    """Mean milliseconds of fn() on torch.cuda (events), after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iterations


# ---- GEMM --------------------------------------------------------------------------------------

def gemm_row(rt, code, size, iterations, tensors):
    """Times rt's gemm entry on (A, B) of ``tensors``; returns ms, max relative error."""
    entry = core_entries(rt).get("gemm")
    if entry is None:
        raise RuntimeError("the runtime has no gemm entry")
    a, b, expected = tensors
    pa, pb = rt.upload(a), rt.upload(b)
    pc = rt.malloc(size * size * a.element_size())
    try:
        args = GemmArgs(dtype=code, batch=1, m=size, n=size, k=size, trans_a=0, trans_b=0, a=pa, a_batch_stride=0,
                        a_ld=size, b=pb, b_batch_stride=0, b_ld=size, c=pc, c_batch_stride=0, c_ld=size,
                        alpha=1.0, beta=0.0)

        def launch():
            rt.check(entry(ctypes.byref(args), rt.stream), "gemm")

        launch()
        got = download(rt, pc, (size, size), a.dtype).float()
        error = ((got - expected).abs().max() / expected.abs().max()).item()
        return rt.time_ms(launch, iterations), error
    finally:
        for p in (pa, pb, pc):
            rt.free(p)


def transposition_errors(rt, code, m=300, n=200, k=100, pad=3):
    """Max relative error of each (trans_a, trans_b) case at sizes that leave partial tiles,
    rows padded (ld = cols + pad), batch 2, alpha 0.5, beta 1: {"NN": err, ...}."""
    entry = core_entries(rt)["gemm"]
    dtype = TORCH[code]
    errors = {}
    for ta in (0, 1):
        for tb in (0, 1):
            a = torch.randn(2, *((k, m) if ta else (m, k))).to(dtype)
            b = torch.randn(2, *((n, k) if tb else (k, n))).to(dtype)
            c = torch.randn(2, m, n).to(dtype)
            a_st = torch.nn.functional.pad(a, (0, pad)).contiguous()
            b_st = torch.nn.functional.pad(b, (0, pad)).contiguous()
            c_st = torch.nn.functional.pad(c, (0, pad)).contiguous()
            pa, pb, pc = rt.upload(a_st), rt.upload(b_st), rt.upload(c_st)
            args = GemmArgs(dtype=code, batch=2, m=m, n=n, k=k, trans_a=ta, trans_b=tb,
                            a=pa, a_batch_stride=a_st[0].numel(), a_ld=a_st.shape[-1],
                            b=pb, b_batch_stride=b_st[0].numel(), b_ld=b_st.shape[-1],
                            c=pc, c_batch_stride=c_st[0].numel(), c_ld=c_st.shape[-1], alpha=0.5, beta=1.0)
            rt.check(entry(ctypes.byref(args), rt.stream), "gemm")
            got = download(rt, pc, tuple(c_st.shape), dtype).float()[..., :n]
            op_a = a.float().transpose(1, 2) if ta else a.float()
            op_b = b.float().transpose(1, 2) if tb else b.float()
            expected = 0.5 * (op_a @ op_b) + c.float()
            errors["NT"[ta] + "NT"[tb]] = float(f"{((got - expected).abs().max() / expected.abs().max()).item():.2e}")
            for p in (pa, pb, pc):
                rt.free(p)
    return errors


def bench_gemm(library, options, size, iterations, tick, dtypes=(F32, BF16, F16), variants=None):
    """Rows of GEMM timings; ``variants`` ({name: build options}) adds tensor-core rows built
    with other shapes (``-DKP_MMA_BK=16 ...``, see gemm_source.cpp), timed on A·B only."""
    torch.manual_seed(0)
    variants = variants or {}
    runtimes = {mode: load_runtime(library, f"{options};gemm={mode}", mode) for mode in ("portable", "mma")}
    for name, build in variants.items():
        runtimes[f"mma:{name}"] = load_runtime(library, f"{options};gemm=mma;build_options={build}", f"v{len(runtimes)}")
    rows = []
    for code in dtypes:
        dtype = TORCH[code]
        a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
        dev = reference_device()
        if dev == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            ga, gb = a.to("cuda"), b.to("cuda")
            cublas_ms = cuda_ms(lambda: torch.mm(ga, gb), iterations)
            expected = (ga.float() @ gb.float()).cpu()
            del ga, gb
        else:
            cublas_ms, expected = None, a.float() @ b.float()
        modes = ("portable",) if code == F32 else ("portable", "mma", *[f"mma:{name}" for name in variants])
        for mode in modes:
            tick(f"gemm {NAMES[code]} {mode}")
            flops = 2.0 * size ** 3
            row = {"dtype": NAMES[code], "kernel": mode, "size": size}
            try:
                ms, error = gemm_row(runtimes[mode], code, size, iterations, (a, b, expected))
            except RuntimeError as failure:
                row.update(error=str(failure)[:4000], goal_met=False)
                rows.append(row)
                continue
            sweep = transposition_errors(runtimes[mode], code) if ":" not in mode else {}
            limit = 1e-4 if code == F32 else 2e-2
            if ":" in mode:
                row["build_options"] = variants[mode.split(":", 1)[1]]
            row.update(ms=round(ms, 3), tflops=round(flops / ms / 1e9, 2), max_rel_error=float(f"{error:.2e}"),
                       transposition_errors=sweep, correct=max([error, *sweep.values()]) <= limit)
            if cublas_ms is not None:
                goal = 0.5 if code == F32 else 0.25
                row.update(cublas_ms=round(cublas_ms, 3), cublas_tflops=round(flops / cublas_ms / 1e9, 2),
                           ratio=round(cublas_ms / ms, 3), goal=goal, goal_met=cublas_ms / ms >= goal)
            rows.append(row)
    return rows


# ---- pointwise and reductions --------------------------------------------------------------------

POINTWISE = {"add": (32, 2), "mul": (34, 2), "gelu": (8, 1), "silu": (10, 1), "where": (64, 3)}
REDUCE = {"sum_rows": (0, 0b10), "sum_cols": (0, 0b01), "amax_rows": (2, 0b10)}


def bench_bandwidth(rt, iterations, tick, nbytes=64 * MIB):
    entries = core_entries(rt)
    rows = []
    for code in (F32, BF16):
        item = 4 if code == F32 else 2
        count = nbytes // item
        rows_n = 4096
        cols_n = count // rows_n
        dtype = TORCH[code]
        torch.manual_seed(0)
        x, y = torch.randn(rows_n, cols_n).to(dtype), torch.randn(rows_n, cols_n).to(dtype)
        cond = (torch.rand(rows_n, cols_n) > 0.5).to(dtype)
        px, py, pc = rt.upload(x), rt.upload(y), rt.upload(cond)
        out = rt.malloc(nbytes)
        copy_ms = rt.copy_ms(nbytes, iterations)  # moves 2 * nbytes
        copy_gbps = 2 * nbytes / GB / (copy_ms / 1e3)
        contiguous = _DIMS(cols_n, 1)
        for name, (op, arity) in POINTWISE.items():
            tick(f"{name} {NAMES[code]}")
            operands = {1: [px], 2: [px, py], 3: [pc, px, py]}[arity]
            ins = (Operand * 3)(*[Operand(data=p, dtype=code, strides=contiguous, value=0.0) for p in operands],
                                *[Operand(data=None, dtype=code, strides=_DIMS(), value=0.0)
                                  for _ in range(3 - arity)])
            args = PointwiseArgs(op=op, ndim=2, sizes=_DIMS(rows_n, cols_n), out=out, out_dtype=code,
                                 out_strides=contiguous, inputs=ins, alpha=1.0)
            launch = lambda: rt.check(entries["pointwise"](ctypes.byref(args), rt.stream), "pointwise")  # noqa: E731
            launch()
            got = download(rt, out, (rows_n, cols_n), dtype).float()
            xf, yf, cf = x.float(), y.float(), cond.float()
            expected = {"add": xf + yf, "mul": xf * yf, "gelu": torch.nn.functional.gelu(xf),
                        "silu": torch.nn.functional.silu(xf), "where": torch.where(cf != 0, xf, yf)}[name]
            error = ((got - expected).abs().max() / expected.abs().max()).item()
            ms = rt.time_ms(launch, iterations)
            moved = (arity + 1) * nbytes
            rows.append(_bandwidth_row(name, code, moved, ms, copy_gbps, error))
        for name, (op, mask) in REDUCE.items():
            tick(f"{name} {NAMES[code]}")
            kept = rows_n if mask == 0b10 else cols_n
            result = rt.malloc(kept * 4)
            args = ReduceArgs(op=op, ndim=2, sizes=_DIMS(rows_n, cols_n), reduce_mask=mask, input=px, in_dtype=code,
                              in_strides=contiguous, out=result, out_dtype=F32,
                              out_strides=_DIMS(1, 0) if mask == 0b10 else _DIMS(0, 1))
            launch = lambda: rt.check(entries["reduce"](ctypes.byref(args), rt.stream), "reduce")  # noqa: E731
            launch()
            got = download(rt, result, (kept,), torch.float32)
            xf = x.float()
            dim = 1 if mask == 0b10 else 0
            expected = xf.sum(dim) if op == 0 else xf.amax(dim)
            error = ((got - expected).abs().max() / expected.abs().max()).item()
            ms = rt.time_ms(launch, iterations)
            rows.append(_bandwidth_row(name, code, nbytes + kept * 4, ms, copy_gbps, error))
            rt.free(result)
        for p in (px, py, pc, out):
            rt.free(p)
    return rows


def bench_launch(rt, iterations):
    """Microseconds per call of a 16 KiB float32 add and row sum: the floor under every
    bandwidth row (host, driver and launch costs), which a 64 MiB op must stay well above.

    ``pointwise_us`` / ``reduce_us``: device time per call (kpdr events around back-to-back
    launches, the best of three rounds), on a stream timing events are recorded on.
    On another stream that never records one (its queue does not profile, runtime option
    profiling=auto): ``*_submit_us``, host wall-clock time per call of issuing them (ctypes
    call included, no synchronisation inside the round): what the host pays per launch,
    which bounds the device time from below when kernels are this small; ``*_wall_us``, the
    same launches plus one kpdrStreamSynchronize, wall clock per call."""
    entries = core_entries(rt)
    rows_n, cols_n = 16, 256
    px, out = rt.upload(torch.randn(rows_n, cols_n)), rt.malloc(rows_n * cols_n * 4)
    contiguous = _DIMS(cols_n, 1)
    ins = (Operand * 3)(Operand(data=px, dtype=F32, strides=contiguous), Operand(data=px, dtype=F32, strides=contiguous),
                        Operand(data=None, dtype=F32, strides=_DIMS()))
    add = PointwiseArgs(op=POINTWISE["add"][0], ndim=2, sizes=_DIMS(rows_n, cols_n), out=out, out_dtype=F32,
                        out_strides=contiguous, inputs=ins, alpha=1.0)
    total = ReduceArgs(op=REDUCE["sum_rows"][0], ndim=2, sizes=_DIMS(rows_n, cols_n), reduce_mask=REDUCE["sum_rows"][1],
                       input=px, in_dtype=F32, in_strides=contiguous, out=out, out_dtype=F32, out_strides=_DIMS(1, 0))
    result = {}
    calls = max(iterations, 20)
    # A stream no timing event is ever recorded on: with profiling=auto its queue does not
    # profile (the runtime's own figure for untimed work), where rt.stream's does.
    plain = _P()
    rt.check(rt.lib.kpdrStreamCreate(0, 0, ctypes.byref(plain)), "kpdrStreamCreate")

    def sync_plain():
        rt.check(rt.lib.kpdrStreamSynchronize(plain), "kpdrStreamSynchronize")

    for name, entry, args in (("pointwise", "pointwise", add), ("reduce", "reduce", total)):
        launch = lambda: rt.check(entries[entry](ctypes.byref(args), rt.stream), entry)  # noqa: E731
        result[name + "_us"] = round(1e3 * min(rt.time_ms(launch, calls) for _ in range(3)), 1)
        untimed = lambda: rt.check(entries[entry](ctypes.byref(args), plain), entry)  # noqa: E731
        submit, wall = [], []
        for _ in range(3):
            untimed()
            sync_plain()
            t0 = time.perf_counter()
            for _ in range(calls):
                untimed()
            t1 = time.perf_counter()
            sync_plain()
            t2 = time.perf_counter()
            submit.append((t1 - t0) / calls)
            wall.append((t2 - t0) / calls)
        result[name + "_submit_us"] = round(1e6 * min(submit), 1)
        result[name + "_wall_us"] = round(1e6 * min(wall), 1)
    rt.check(rt.lib.kpdrStreamDestroy(plain), "kpdrStreamDestroy")
    rt.free(px)
    rt.free(out)
    return result


def bench_launch_side_by_side(libraries, iterations, rounds=5):
    """bench_launch for each {label: (library path, options)}, interleaved over ``rounds``
    (the best of each kept): two builds or configurations of the runtime compared in one
    process and machine state."""
    runtimes = {label: load_runtime(path, options, f"launch-{label}") for label, (path, options) in libraries.items()}
    best = {}
    for _ in range(rounds):
        for label, rt in runtimes.items():
            for key, value in bench_launch(rt, iterations).items():
                best.setdefault(label, {})[key] = min(value, best.get(label, {}).get(key, value))
    return best


def _bandwidth_row(name, code, moved, ms, copy_gbps, error):
    gbps = moved / GB / (ms / 1e3)
    return {"op": name, "dtype": NAMES[code], "bytes": moved, "ms": round(ms, 4), "gbps": round(gbps, 1),
            "copy_gbps": round(copy_gbps, 1), "ratio": round(gbps / copy_gbps, 3), "goal": 0.7,
            "goal_met": gbps / copy_gbps >= 0.7, "max_rel_error": float(f"{error:.2e}"),
            "correct": error <= (1e-4 if code == F32 else 2e-2)}


# ---- the tiny-Llama training step ----------------------------------------------------------------

TRAIN_CHILD = r"""
import json, sys, time, torch
device, batch, seq, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
import transformers
if device == "my_asic":
    import kernel_pytorch  # noqa: F401  (registers my_asic)
torch.manual_seed(0)
config = transformers.LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                  num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=seq)
model = transformers.LlamaForCausalLM(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g).to(device)
def sync():
    if device == "cuda": torch.cuda.synchronize()
    elif device == "my_asic": torch.my_asic.synchronize()
def step():
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    return loss
losses = [step().item() for _ in range(2)]  # warm-up: kernel builds, allocator pools
if device == "my_asic":
    torch.my_asic.reset_fallback_stats()
sync()
start = time.perf_counter()
for _ in range(steps):
    loss = step()
sync()
elapsed = (time.perf_counter() - start) / steps
result = {"device": device, "step_s": elapsed, "loss": loss.item(), "warmup_losses": losses,
          "threads": torch.get_num_threads()}
if device == "my_asic":
    result["fallbacks"] = {k: v for k, v in torch.my_asic.fallback_stats().items()}
print("RESULT " + json.dumps(result, default=str))
"""


def train_child(device, batch, seq, steps, options):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MY_ASIC_", "MYASIC_"))}
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if device == "my_asic":
        env.update(MY_ASIC_ENABLE="1", MY_ASIC_RUNTIME="opencl", MY_ASIC_RUNTIME_OPTIONS=options)
        for key in ("MY_ASIC_OPENCL_CACHE_DIR", "MY_ASIC_OPENCL_GEMM"):
            if key in os.environ:
                env[key] = os.environ[key]
    done = subprocess.run([sys.executable, "-c", TRAIN_CHILD, device, str(batch), str(seq), str(steps)], env=env,
                          cwd=tempfile.gettempdir(), capture_output=True, text=True, timeout=1800)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"device": device, "error": f"exit {done.returncode}: {done.stderr[-3000:]}"}


def bench_train(options, batch, seq, steps, tick, devices):
    results = {}
    for device in devices:
        tick(f"train step {device}")
        results[device] = train_child(device, batch, seq, steps if device != "cpu" else max(1, steps // 3), options)
    report = {"batch": batch, "seq": seq, "runs": results}
    ours = results.get("my_asic", {}).get("step_s")
    if ours:
        for device, goal, key in (("cuda", 0.4, "vs_cuda"), ("cpu", 3.0, "vs_cpu")):
            theirs = results.get(device, {}).get("step_s")
            if theirs:
                report[key] = {"speed_ratio": round(theirs / ours, 3), "goal": goal, "goal_met": theirs / ours >= goal}
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", default=str(REPO_ROOT / "kernel_pytorch" / "lib" / "libkpdr_opencl.so"))
    parser.add_argument("--options", default=os.environ.get("MY_ASIC_RUNTIME_OPTIONS", ""),
                        help="kpdrInit options, e.g. platform=NVIDIA")
    parser.add_argument("--parts", default="gemm,bandwidth,train",
                        help="comma list of gemm,bandwidth,train,launch (launch: the launch floor alone)")
    parser.add_argument("--baseline-library", help="with --parts launch: a second build of the runtime whose "
                        "launch floor is measured beside --library's, interleaved in the same process")
    parser.add_argument("--baseline-options", help="with --parts launch: the baseline's runtime options (default "
                        "--options); with no --baseline-library, --library again under these options")
    parser.add_argument("--quick", action="store_true", help="smaller shapes, fewer iterations (smoke runs, PoCL)")
    parser.add_argument("--size", type=int, help="GEMM edge (default 4096; 256 with --quick)")
    parser.add_argument("--gemm-dtypes", default="fp32,bf16,fp16", help="comma list of fp32,bf16,fp16")
    parser.add_argument("--mma-variant", action="append", default=[], metavar="NAME=BUILD_OPTIONS",
                        help="also time the tensor-core kernel built with these options (16-bit rows, A·B only), "
                             "e.g. 'bk16=-DKP_MMA_BK=16 -DKP_MMA_STAGES=4'; repeatable")
    parser.add_argument("--train-devices", default=None,
                        help="comma list of my_asic,cuda,cpu (default: those present)")
    parser.add_argument("--steps", type=int, default=None, help="timed training steps (default 6; 1 with --quick)")
    parser.add_argument("--iterations", type=int, help="timed launches per GEMM/bandwidth row (default 10)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    iterations = args.iterations or (2 if args.quick else 10)
    size = args.size or (256 if args.quick else 4096)
    total = 5 * ("gemm" in parts) + 16 * ("bandwidth" in parts) + 3 * ("train" in parts) + ("launch" in parts)
    done = [0]

    def tick(label):
        progress(min(done[0], total), total, label)
        done[0] += 1

    report = {"options": args.options, "quick": args.quick}
    if "gemm" in parts:
        codes = {name: code for code, name in NAMES.items()}
        dtypes = [codes[d.strip()] for d in args.gemm_dtypes.split(",") if d.strip()]
        variants = dict(v.split("=", 1) for v in args.mma_variant)
        total += len(variants) * sum(code != F32 for code in dtypes)
        report["gemm"] = bench_gemm(args.library, args.options, size, iterations, tick, dtypes, variants)
    if "bandwidth" in parts:
        rt = load_runtime(args.library, args.options, "bandwidth")
        report["device"] = rt.name()
        report["bandwidth"] = bench_bandwidth(rt, iterations, tick, nbytes=(MIB if args.quick else 64 * MIB))
        report["launch_floor"] = bench_launch(rt, iterations)
    if "launch" in parts and "bandwidth" not in parts:
        tick("launch floor")
        libraries = {"library": (args.library, args.options)}
        if args.baseline_library or args.baseline_options is not None:
            baseline = (args.baseline_library or args.library,
                        args.options if args.baseline_options is None else args.baseline_options)
            libraries = {"baseline": baseline, **libraries}
        report["launch_side_by_side"] = bench_launch_side_by_side(libraries, iterations)
        report["launch_floor"] = report["launch_side_by_side"]["library"]
    if "train" in parts:
        devices = args.train_devices.split(",") if args.train_devices else (
            ["my_asic"] + (["cuda"] if torch.cuda.is_available() else []) + ["cpu"])
        batch, seq = (2, 64) if args.quick else (8, 512)
        steps = args.steps or (1 if args.quick else 6)
        report["train"] = bench_train(args.options, batch, seq, steps, tick, devices)
    progress(total, total, "done")

    for row in report.get("gemm", []):
        if "error" in row:
            print(f"gemm {row['dtype']} {row['kernel']}: FAILED {row['error'][:300]}")
            continue
        vs = (f" cuBLAS {row['cublas_tflops']:.1f} TFLOPS ratio {row['ratio']:.2f} (goal {row['goal']})"
              if "ratio" in row else "")
        worst = max(row["transposition_errors"].values(), default=None)
        print(f"gemm {row['dtype']} {row['kernel']:<8} {row['tflops']:8.2f} TFLOPS{vs} err {row['max_rel_error']:.1e} "
              + (f"(NN/NT/TN/TT odd sizes {worst:.1e})" if worst is not None else "(A·B only)")
              + ("" if row["correct"] else " WRONG"))
    for row in report.get("bandwidth", []):
        print(f"{row['op']:<10}{row['dtype']:<5}{row['gbps']:8.1f} GB/s  copy {row['copy_gbps']:8.1f}  "
              f"ratio {row['ratio']:.2f}  err {row['max_rel_error']:.1e}")
    if "launch_floor" in report:
        floor = report["launch_floor"]
        for label, floor in report.get("launch_side_by_side", {"library": floor}).items():
            print(f"launch floor (16 KiB float32) {label}: pointwise {floor['pointwise_us']} us, reduce "
                  f"{floor['reduce_us']} us per call (device, timed stream); untimed stream: host submits "
                  f"{floor['pointwise_submit_us']} / {floor['reduce_submit_us']} us, wall with the drain "
                  f"{floor['pointwise_wall_us']} / {floor['reduce_wall_us']} us per call")
    if "train" in report:
        for device, run in report["train"]["runs"].items():
            print(f"train {device}: " + (f"{run['step_s'] * 1e3:.1f} ms/step loss {run['loss']:.3f}"
                                         if "step_s" in run else run.get("error", "")[:500]))
        fallbacks = report["train"]["runs"].get("my_asic", {}).get("fallbacks")
        if fallbacks is not None:
            print("fallback ops during the timed my_asic steps:", json.dumps(fallbacks) if fallbacks else "none")
        for key in ("vs_cuda", "vs_cpu"):
            if key in report["train"]:
                print(f"train {key}: {report['train'][key]}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    correct = all(r.get("correct", True) for part in ("gemm", "bandwidth") for r in report.get(part, []))
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
