"""kernel_pytorch.ops on a CUDA GPU against PyTorch, side by side in one run.

For each case (LLM shapes, bfloat16 by default) it times, on the same GPU:
eager PyTorch, ``torch.compile`` of the same code, PyTorch's best single call
where one exists (``F.rms_norm``, ``scaled_dot_product_attention``,
``torch.mv``, ``torch.softmax``), our kernel, and a device-to-device copy
moving the same number of bytes (the bandwidth ceiling). Each contender is
captured in a CUDA graph of ``--calls`` back-to-back calls and replayed, so
the times are GPU time, not Python dispatch; contenders that cannot be
captured are timed eagerly (marked). Bandwidths are GB/s (10^9 bytes/s) of
bytes read + written by the op.

Usage: python benchmarks/kernels_cuda.py [--dtype bfloat16] [--json out.json] [--quick]
"""

import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

import kernel_pytorch.ops as kops


# ---------------------------------------------------------------- timing

def _time_graph(fn, calls, replays):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = math.inf
    for _ in range(replays):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) * 1000.0 / calls)
    del graph
    return best


def _time_eager(fn, calls, replays):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = math.inf
    for _ in range(replays):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) * 1000.0 / calls)
    return best


def time_us(fn, calls=20, replays=5):
    """Best mean microseconds per call, and whether it was measured from a CUDA graph."""
    try:
        return _time_graph(fn, calls, replays), True
    except Exception:  # noqa: BLE001  (not capturable: time it eagerly)
        torch.cuda.synchronize()
        return _time_eager(fn, calls, replays), False


def compiled(fn):
    return torch.compile(fn, dynamic=False)


# ---------------------------------------------------------------- cases

def rms_ref(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def case_rms_norm(rows, cols, dtype):
    x, w = torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(cols, device="cuda", dtype=dtype)
    return dict(op="rms_norm", shape=f"{rows}x{cols}", bytes=2 * x.nbytes + w.nbytes,
                eager=lambda: rms_ref(x, w), compile=compiled(rms_ref), compile_args=(x, w),
                best=("F.rms_norm", lambda: F.rms_norm(x, (cols,), w, 1e-6)),
                ours=lambda: kops.rms_norm(x, w))


def fused_ref(x, r, w, eps=1e-6):
    s = x + r
    return rms_ref(s, w, eps), s


def case_fused_add_rms_norm(rows, cols, dtype):
    x, r = torch.randn(rows, cols, device="cuda", dtype=dtype), torch.randn(rows, cols, device="cuda", dtype=dtype)
    w = torch.randn(cols, device="cuda", dtype=dtype)
    return dict(op="fused_add_rms_norm", shape=f"{rows}x{cols}", bytes=4 * x.nbytes + w.nbytes,
                eager=lambda: fused_ref(x, r, w), compile=compiled(fused_ref), compile_args=(x, r, w),
                best=None, ours=lambda: kops.fused_add_rms_norm(x, r, w))


def swiglu_ref(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def case_silu_and_mul(rows, cols, dtype):
    x = torch.randn(rows, 2 * cols, device="cuda", dtype=dtype)
    return dict(op="silu_and_mul", shape=f"{rows}x2*{cols}", bytes=x.nbytes + x.nbytes // 2,
                eager=lambda: swiglu_ref(x), compile=compiled(swiglu_ref), compile_args=(x,),
                best=None, ours=lambda: kops.silu_and_mul(x))


def rope_ref(x, cos, sin):
    h = x.shape[-1] // 2
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def case_apply_rope(tokens, hidden, dtype, head_dim=128):
    heads = hidden // head_dim
    x = torch.randn(1, tokens, heads, head_dim, device="cuda", dtype=dtype)
    ang = torch.arange(tokens, device="cuda", dtype=torch.float32)[:, None] * 10000.0 ** (
        -torch.arange(head_dim // 2, device="cuda", dtype=torch.float32) / (head_dim // 2))
    cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
    return dict(op="apply_rope", shape=f"{tokens}x{hidden} ({heads} heads)", bytes=2 * x.nbytes + cos.nbytes + sin.nbytes,
                eager=lambda: rope_ref(x, cos, sin), compile=compiled(rope_ref), compile_args=(x, cos, sin),
                best=None, ours=lambda: kops.apply_rope(x, cos, sin))


def softmax_ref(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def case_softmax(rows, cols, dtype):
    x = torch.randn(rows, cols, device="cuda", dtype=dtype)
    return dict(op="softmax", shape=f"{rows}x{cols}", bytes=2 * x.nbytes,
                eager=lambda: softmax_ref(x), compile=compiled(softmax_ref), compile_args=(x,),
                best=("torch.softmax", lambda: torch.softmax(x, -1)), ours=lambda: kops.softmax(x))


def sdpa_decode(q, k, v):
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True).squeeze(2)


def case_decode_attention(B, H, Hkv, T, D, dtype):
    q = torch.randn(B, H, D, device="cuda", dtype=dtype)
    k, v = torch.randn(B, Hkv, T, D, device="cuda", dtype=dtype), torch.randn(B, Hkv, T, D, device="cuda", dtype=dtype)
    return dict(op="decode_attention", shape=f"B={B} H={H} Hkv={Hkv} T={T} D={D}", bytes=k.nbytes + v.nbytes + 2 * q.nbytes,
                eager=lambda: sdpa_decode(q, k, v), compile=compiled(sdpa_decode), compile_args=(q, k, v),
                best=("SDPA", lambda: sdpa_decode(q, k, v)), ours=lambda: kops.decode_attention(q, k, v))


def case_matmul_vec(n, k, dtype):
    w, x = torch.randn(n, k, device="cuda", dtype=dtype), torch.randn(k, device="cuda", dtype=dtype)
    return dict(op="matmul_vec", shape=f"{n}x{k}", bytes=w.nbytes + x.nbytes + n * w.element_size(),
                eager=lambda: torch.mv(w, x), compile=compiled(lambda w, x: torch.mv(w, x)), compile_args=(w, x),
                best=("torch.mv", lambda: torch.mv(w, x)), ours=lambda: kops.matmul_vec(w, x))


# Done-when targets of the issue: (ours / copy bandwidth, ours vs compile, ours vs PyTorch's best).
def targets(case):
    op, shape = case["op"], case["shape"]
    if op in ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "apply_rope"):
        return {"copy_fraction": 0.85, "vs_compile": 1.2}
    if op == "decode_attention":
        return {"vs_best": 1.1 if "T=4096" in shape else 1.0}
    if op == "matmul_vec":
        return {"vs_best": 1.5} if shape == "4096x4096" else {"copy_fraction": 0.85} if shape == "16384x16384" else {}
    if op == "softmax":
        return {"vs_best": 1.0}
    return {}


def cases(dtype, quick):
    sizes = [(2048, 4096)] if quick else [(2048, 4096), (8192, 8192)]
    out = []
    for r, c in sizes:
        out += [lambda r=r, c=c: case_rms_norm(r, c, dtype), lambda r=r, c=c: case_fused_add_rms_norm(r, c, dtype),
                lambda r=r, c=c: case_silu_and_mul(r, c, dtype), lambda r=r, c=c: case_apply_rope(r, c, dtype)]
    out.append(lambda: case_softmax(4096, 4096, dtype))
    for T in ([4096] if quick else [4096, 16384, 32768]):
        out.append(lambda T=T: case_decode_attention(8, 32, 8, T, 128, dtype))
    for n, k in ([(4096, 4096)] if quick else [(4096, 4096), (16384, 16384)]):
        out.append(lambda n=n, k=k: case_matmul_vec(n, k, dtype))
    return out


HEAD = (f"{'op':<19} {'shape':<30} {'copy':>7} {'eager':>7} {'compile':>7} {'best':>7} {'ours':>7} | "
        f"{'ours GB/s':>9} {'copy GB/s':>9} {'%copy':>6} {'xeager':>6} {'xcomp':>6} {'xbest':>6} target")


def print_row(r):
    """One line of the table: times in microseconds, bandwidths in GB/s, ratios (higher = ours faster)."""
    def fmt(k):
        return f"{r[k]:7.1f}" if k in r else f"{'-':>7}"

    ok = {None: "", True: "PASS", False: "MISS"}[r["meets_targets"]]
    print(f"{r['op']:<19} {r['shape']:<30} {fmt('copy_us')} {fmt('eager_us')} {fmt('compile_us')} "
          f"{fmt('best_us')} {fmt('ours_us')} | {r.get('ours_GBps', 0):9.0f} {r.get('copy_GBps', 0):9.0f} "
          f"{100 * r.get('copy_fraction', 0):5.0f}% {r.get('vs_eager', 0):6.2f} {r.get('vs_compile', 0):6.2f} "
          f"{r.get('vs_best', 0):6.2f} {ok} {r['targets'] if r['targets'] else ''}", flush=True)
    for k in [k for k in r if k.endswith("_error")]:
        print(f"    {k}: {r[k]}", flush=True)


def progress(i, total, label):
    width = 30
    done = int(width * i / total)
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] {i}/{total} {label[:60]:<60}")
    sys.stderr.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--json", help="write the results here (JSON)")
    parser.add_argument("--quick", action="store_true", help="one size per op")
    parser.add_argument("--calls", type=int, default=20, help="calls per CUDA graph")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks/kernels_cuda.py needs a CUDA GPU")
    dtype = getattr(torch, args.dtype)
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)
    makers = cases(dtype, args.quick)
    results = []
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; {args.dtype}; "
          f"kernel_pytorch cuda: {kops.backend_info()['cuda']}")
    print(HEAD)
    print("-" * len(HEAD), flush=True)
    t0 = time.time()
    for i, make in enumerate(makers):
        case = make()
        progress(i, len(makers), f"{case['op']} {case['shape']}")
        row = {"op": case["op"], "shape": case["shape"], "dtype": args.dtype, "bytes": case["bytes"]}
        copy_src = torch.empty(case["bytes"] // 2, device="cuda", dtype=torch.uint8)
        contenders = [("copy", lambda: copy_src.clone()), ("eager", case["eager"]),
                      ("compile", lambda: case["compile"](*case["compile_args"])), ("ours", case["ours"])]
        if case["best"] is not None:
            contenders.append(("best", case["best"][1]))
            row["best_name"] = case["best"][0]
        for name, fn in contenders:
            try:
                us, graphed = time_us(fn, calls=args.calls)
                row[f"{name}_us"] = us
                row[f"{name}_GBps"] = case["bytes"] / us / 1e3
                if not graphed:
                    row.setdefault("eager_timed", []).append(name)
            except Exception as e:  # noqa: BLE001  (a contender that fails is reported, not fatal)
                row[f"{name}_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if "ours_us" in row:
            row["copy_fraction"] = row["copy_us"] / row["ours_us"]
            for other in ("eager", "compile", "best"):
                if f"{other}_us" in row:
                    row[f"vs_{other}"] = row[f"{other}_us"] / row["ours_us"]
        goals = targets(case)
        row["targets"] = goals
        row["meets_targets"] = all(row.get(k, 0) >= v for k, v in goals.items()) if goals else None
        results.append(row)
        sys.stderr.write("\r" + " " * 110 + "\r")
        print_row(row)
        del case, copy_src
        torch.cuda.empty_cache()
    progress(len(makers), len(makers), f"done in {time.time() - t0:.0f} s")
    sys.stderr.write("\n")

    print("(times in microseconds per call; best = PyTorch's best single call: " +
          ", ".join(sorted({r['best_name'] for r in results if 'best_name' in r})) + ")")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                       "cuda_backend": kops.backend_info()["cuda"], "tuning": kops.tuning_entries(),
                       "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
