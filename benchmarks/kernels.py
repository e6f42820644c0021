"""kernel_pytorch.ops against eager PyTorch, torch.compile and a memory copy, side by side.

For each op at LLM shapes, in float32 and bfloat16, one run times:

* ``eager``   -- the natural unfused PyTorch code (Hugging Face's LlamaRMSNorm,
  ``F.silu(gate) * up``, ``rotate_half`` rope, ``torch.softmax``,
  ``F.scaled_dot_product_attention(enable_gqa=True)``, ``torch.mv``);
* ``compile`` -- ``torch.compile`` (Inductor) of that same eager code;
* ``ours``    -- ``torch.ops.kernel_pytorch.<op>`` on cpu;
* ``my_asic`` -- the same op on my_asic (synchronised after every call);
* ``clone``   -- ``Tensor.clone`` of a buffer moving the same number of bytes
  (read + written), the memory-bound ceiling of this machine.

Times are medians of several repetitions after warm-up, taken round-robin over
the variants so that drift on a shared machine hits all of them alike; the
first call of each variant's turn is not counted (it pays for the switch:
1.3-1.6x a steady call for rms_norm 2048x4096). Each
variant's turn starts after a short pause (``SETTLE_S``): OpenMP's threads
(eager and compiled code) spin for about 10 ms after a parallel region ends,
and would otherwise take a core from whichever variant runs next (measured:
the first two silu_and_mul calls after eager ran 30-50% slower).
GB/s counts bytes read + bytes written (1 GB = 1e9 bytes) per call; for
attention it counts q, k, v and the output once (prefill is compute bound:
its GFLOP/s column is the meaningful one). Ratios: ``x eager`` and
``x compile`` are speed-ups of ours (>1 is faster), ``of clone`` is ours'
bandwidth as a fraction of clone's, ``asic/cpu`` is my_asic time / cpu time.

    python benchmarks/kernels.py [--device cpu|my_asic|all] [--quick] [--output kernels.json]
    python benchmarks/kernels.py --device cpu --threads-sweep      # 1, 4 and all cores
    python benchmarks/kernels.py --device cpu --threads 1,4,16 --no-compile

``--quick`` runs small shapes in float32 (a smoke run, well under a minute).

Scaling with threads (``--threads 1,4,16`` or ``--threads-sweep``): every case
is measured at each thread count (``torch.set_num_threads``, which governs
eager, compile, clone and ours alike), and a last table puts, per op, ours'
fraction of clone's bandwidth and its speed-up over PyTorch side by side for
each thread count, against the scaling targets (issue 20): the memory-bound
ops and matmul_vec >= 0.85x clone at every thread count; decode_attention
>= 0.7x clone and >= 1x SDPA; bfloat16 prefill >= 1.5x SDPA.

Caches (``--cache``): ``hot`` (the default) calls every variant on the same
buffers, so operands smaller than the last-level cache are served from it --
and with several threads each thread's slice of a copy can stay in its own L2
(16 MiB over 16 cores is 1 MiB each), so ``clone`` then measures cache, not
memory, bandwidth. ``cold`` gives every variant a ring of copies of its
operands (and clone of its source) totalling at least twice the last-level
cache, and each call takes the next copy: every call reads its operands from
memory, which is what an LLM's weights and KV cache do in serving (a model's
layers together are far larger than the cache). Both modes time the same code;
the JSON records which one ran.

CPU memory: glibc returns every block over 32 MB to the OS when it is freed,
so an op whose output is that large page-faults all of it in again on every
call (~4x the op's own time here) -- while my_asic's caching allocator reuses
its blocks. ``--cpu-allocator cached`` (the default) keeps freed memory in the
process (mallopt: no mmap, no trim), as jemalloc or tcmalloc would, so the
figures measure the kernels; ``system`` leaves glibc as it is.
"""

import argparse
import ctypes
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import kernel_pytorch  # noqa: F401  (registers my_asic)
import kernel_pytorch.ops as kops
from kernel_pytorch import asic

OPS = torch.ops.kernel_pytorch
EPS = 1e-6

# The targets (issue 6, "Done when").
MEMORY_BOUND = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "apply_rope")


# ------------------------------------------------------------- eager code

def eager_rms_norm(x, weight):
    """Hugging Face LlamaRMSNorm.forward."""
    input_dtype = x.dtype
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + EPS)
    return weight * hidden.to(input_dtype)


def eager_fused_add_rms_norm(x, residual, weight):
    s = x + residual
    return eager_rms_norm(s, weight), s


def eager_silu_and_mul(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def eager_rope(x, cos_full, sin_full):
    """Hugging Face apply_rotary_pos_emb on [batch, seq, heads, head_dim] with [seq, head_dim] tables."""
    c, s = cos_full.unsqueeze(-2), sin_full.unsqueeze(-2)
    return x * c + _rotate_half(x) * s


def eager_softmax(x):
    return torch.softmax(x, -1)


def eager_decode(q, k, v):
    return F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True).squeeze(2)


def eager_prefill(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def eager_mv(w, x):
    return torch.mv(w, x)


# ------------------------------------------------------------------ cases

def _elt(dtype):
    return torch.empty((), dtype=dtype).element_size()


def make_cases(quick):
    """Each case: name, shape text, builder(dtype) -> dict(inputs, eager, ours, bytes, flops)."""
    n, hidden = (256, 1024) if quick else (2048, 4096)
    inter = 1376 if quick else 11008
    seq, heads, kv_heads, head_dim = (256, 8, 2, 64) if quick else (2048, 32, 8, 128)
    cache = 512 if quick else 4096
    long_cache = 16384  # the second cache length of the scaling targets (not in --quick)
    prefill_t = 256 if quick else 2048
    mv = 1024 if quick else 4096

    def rms(dtype):
        x, w = torch.randn(n, hidden, dtype=dtype), torch.randn(hidden, dtype=dtype)
        return dict(inputs=(x, w), eager=eager_rms_norm, ours=lambda x, w: OPS.rms_norm(x, w, EPS),
                    bytes=(2 * n * hidden + hidden) * _elt(dtype))

    def fused(dtype):
        x, r, w = torch.randn(n, hidden, dtype=dtype), torch.randn(n, hidden, dtype=dtype), torch.randn(hidden, dtype=dtype)
        return dict(inputs=(x, r, w), eager=eager_fused_add_rms_norm,
                    ours=lambda x, r, w: OPS.fused_add_rms_norm(x, r, w, EPS),
                    bytes=(4 * n * hidden + hidden) * _elt(dtype))

    def swiglu(dtype):
        x = torch.randn(n, 2 * inter, dtype=dtype)
        return dict(inputs=(x,), eager=eager_silu_and_mul, ours=OPS.silu_and_mul, bytes=3 * n * inter * _elt(dtype))

    def rope(dtype):
        x = torch.randn(1, seq, heads, head_dim, dtype=dtype)
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
        cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
        cos_full, sin_full = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
        return dict(inputs=(x, cos, sin), eager_inputs=(x, cos_full, sin_full), eager=eager_rope,
                    ours=lambda x, c, s: OPS.apply_rope(x, c, s, False),
                    bytes=(2 * x.numel() + 2 * cos.numel()) * _elt(dtype))

    def softmax(dtype):
        x = torch.randn(n, hidden, dtype=dtype)
        return dict(inputs=(x,), eager=eager_softmax, ours=lambda x: OPS.softmax(x, -1), bytes=2 * x.numel() * _elt(dtype))

    def decode(batch, cache=cache):
        def build(dtype):
            q = torch.randn(batch, heads, head_dim, dtype=dtype)
            k = torch.randn(batch, kv_heads, cache, head_dim, dtype=dtype)
            v = torch.randn(batch, kv_heads, cache, head_dim, dtype=dtype)
            return dict(inputs=(q, k, v), eager=eager_decode,
                        ours=lambda q, k, v: OPS.decode_attention(q, k, v, None, None),
                        bytes=(2 * q.numel() + k.numel() + v.numel()) * _elt(dtype),
                        flops=4.0 * batch * heads * cache * head_dim)
        return build

    def prefill(dtype):
        q = torch.randn(1, heads, prefill_t, head_dim, dtype=dtype)
        k = torch.randn(1, kv_heads, prefill_t, head_dim, dtype=dtype)
        v = torch.randn(1, kv_heads, prefill_t, head_dim, dtype=dtype)
        return dict(inputs=(q, k, v), eager=eager_prefill,
                    ours=lambda q, k, v: OPS.prefill_attention(q, k, v, True, None),
                    bytes=(2 * q.numel() + k.numel() + v.numel()) * _elt(dtype),
                    flops=2.0 * heads * prefill_t * prefill_t * head_dim)  # causal: half of 4*T*T*D per head

    def matvec(dtype):
        w, x = torch.randn(mv, mv, dtype=dtype), torch.randn(mv, dtype=dtype)
        return dict(inputs=(w, x), eager=eager_mv, ours=OPS.matmul_vec, bytes=(mv * mv + 2 * mv) * _elt(dtype),
                    flops=2.0 * mv * mv)

    return [
        ("rms_norm", f"{n}x{hidden}", rms),
        ("fused_add_rms_norm", f"{n}x{hidden}", fused),
        ("silu_and_mul", f"{n}x2*{inter}", swiglu),
        ("apply_rope", f"[1,{seq},{heads},{head_dim}]", rope),
        ("softmax", f"{n}x{hidden} (last dim)", softmax),
        ("decode_attention", f"B=1 H={heads} Hkv={kv_heads} T={cache} D={head_dim}", decode(1)),
        ("decode_attention", f"B=8 H={heads} Hkv={kv_heads} T={cache} D={head_dim}", decode(8)),
        *([] if quick else [
            (f"decode_attention", f"B={b} H={heads} Hkv={kv_heads} T={long_cache} D={head_dim}",
             decode(b, long_cache)) for b in (1, 8)]),
        ("prefill_attention", f"B=1 H={heads} Hkv={kv_heads} T={prefill_t} D={head_dim} causal", prefill),
        ("matmul_vec", f"{mv}x{mv}", matvec),
    ]


# ----------------------------------------------------------------- timing

def keep_freed_memory():
    """Makes glibc malloc keep freed memory for reuse (no mmap'd blocks, no trimming); returns success."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))


class Progress:
    """A one-line text progress bar on stderr."""

    def __init__(self, total):
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def step(self, label):
        self.done += 1
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        elapsed = time.perf_counter() - self.start
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{elapsed:6.0f}s  {label[:60]:<60}")
        sys.stderr.flush()

    def close(self):
        sys.stderr.write("\n")
        sys.stderr.flush()


def _sync_for(args, fn=None):
    args = getattr(fn, "sync_args", args)
    if any(isinstance(a, torch.Tensor) and a.device.type == "my_asic" for a in args):
        return torch.my_asic.synchronize
    return lambda: None


# Pause before each variant's turn in a round, seconds: longer than libgomp's
# spin-wait after a parallel region (GOMP_SPINCOUNT, ~10 ms here), so the
# previous variant's idle OpenMP threads are asleep when the next one starts.
SETTLE_S = 0.02


def time_round_robin(variants, target_s, min_reps, max_reps, rounds=8, settle_s=SETTLE_S):
    """Seconds per call of each ``name -> (fn, args)``, measured in interleaved rounds.

    Returns ``{name: (median, minimum)}``: the median is the figure reported;
    the minimum (what the call costs when nothing else runs) goes into the JSON.
    """
    samples = {name: [] for name in variants}
    calls = {}
    for name, (fn, args) in variants.items():
        sync = _sync_for(args, fn)
        fn(*args)  # warm up: a first call also allocates its output (a device's first pays page faults)
        sync()
        start = time.perf_counter()
        fn(*args)  # sized by a warm call, or a slow first call would give this variant fewer calls
        sync()
        one = time.perf_counter() - start
        # Calls per round: the budget split over the rounds, at least min_reps in all.
        per_round = int(target_s / rounds / max(one, 1e-6))
        calls[name] = (fn, args, sync, max(-(-min_reps // rounds), min(max_reps // rounds, per_round)))
    for _ in range(rounds):
        for name, (fn, args, sync, reps) in calls.items():
            time.sleep(settle_s)
            # The first call of a turn pays for the switch (cold caches, the
            # variant's threads waking up) and is not counted: it would weigh
            # 1/reps in each variant's median, more where calls are slower.
            fn(*args)
            sync()
            for _ in range(reps):
                start = time.perf_counter()
                fn(*args)
                sync()
                samples[name].append(time.perf_counter() - start)
    return {name: (statistics.median(s), min(s)) for name, s in samples.items()}


def _max_diff(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return max(float((x.float().cpu() - y.float().cpu()).abs().max()) if x.numel() else 0.0 for x, y in zip(a, b))


def last_level_cache_bytes():
    """Size of the largest CPU cache in bytes (sysfs, else sysconf), or 256 MiB when unknown."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KkMmGg")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    if best == 0:
        try:
            best = os.sysconf("SC_LEVEL3_CACHE_SIZE")
        except (ValueError, OSError):
            best = 0
    return best if best > 0 else 256 << 20


class Ring:
    """Calls ``fn`` on the next of several copies of its arguments each time (``--cache cold``),
    so no call finds its operands in a cache the previous calls filled."""

    def __init__(self, fn, arg_sets):
        self.fn, self.arg_sets, self.next = fn, arg_sets, 0
        self.sync_args = arg_sets[0]

    def __call__(self):
        args = self.arg_sets[self.next]
        self.next = (self.next + 1) % len(self.arg_sets)
        return self.fn(*args)


def _copies(args, count):
    """``count`` argument tuples: the originals, then clones of every tensor in them."""
    sets = [tuple(args)]
    for _ in range(count - 1):
        sets.append(tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    return sets


def make_cold(variants, working_bytes, cache_bytes):
    """Each ``name -> (fn, args)`` as a Ring over copies totalling >= 2x the cache; returns the ring length."""
    count = max(2, -(-2 * cache_bytes // max(working_bytes, 1)))
    shared = {}
    for name, (fn, args) in list(variants.items()):
        key = tuple(id(a) for a in args)  # eager and ours usually share their inputs: one ring of copies
        if key not in shared:
            shared[key] = _copies(args, count)
        variants[name] = (Ring(fn, shared[key]), ())
    return count


def run_case(op, shape, build, dtype, devices, use_compile, target_s, progress, cache="hot"):
    case = build(dtype)
    inputs = case["inputs"]
    eager_inputs = case.get("eager_inputs", inputs)
    label = f"{op} {shape} {str(dtype).replace('torch.', '')}"
    variants = {}
    result = {"op": op, "shape": shape, "dtype": str(dtype).replace("torch.", ""), "bytes": case["bytes"],
              "flops": case.get("flops")}

    variants["eager"] = (case["eager"], eager_inputs)
    if use_compile:
        progress.step(label + ": compiling")
        torch._dynamo.reset()
        compiled = torch.compile(case["eager"], fullgraph=True, dynamic=False)
        start = time.perf_counter()
        compiled(*eager_inputs)
        result["compile_warmup_s"] = round(time.perf_counter() - start, 2)
        variants["compile"] = (compiled, eager_inputs)
    if "cpu" in devices:
        variants["ours"] = (case["ours"], inputs)
        result["max_abs_diff_vs_eager"] = _max_diff(case["ours"](*inputs), case["eager"](*eager_inputs))
    if "my_asic" in devices:
        dev_inputs = tuple(t.to("my_asic") for t in inputs)
        torch.my_asic.synchronize()
        variants["my_asic"] = (case["ours"], dev_inputs)
        asic.reset_fallback_stats()
        out = case["ours"](*dev_inputs)
        torch.my_asic.synchronize()
        result["my_asic_max_abs_diff_vs_eager"] = _max_diff(out, case["eager"](*eager_inputs))
    clone_src = torch.empty(max(1, case["bytes"] // 2), dtype=torch.uint8).random_()
    variants["clone"] = (torch.clone, (clone_src,))

    result["cache"] = cache
    if cache == "cold":
        progress.step(label + ": copies")
        result["cold_copies"] = make_cold(variants, case["bytes"], last_level_cache_bytes())
    progress.step(label + ": timing")
    if "my_asic" in devices:
        asic.reset_fallback_stats()
    timed = time_round_robin(variants, target_s=target_s, min_reps=3, max_reps=200)
    times = {k: v[0] for k, v in timed.items()}
    result["ms_min"] = {k: v[1] * 1e3 for k, v in timed.items()}
    if "my_asic" in devices:
        torch.my_asic.synchronize()
        stats = asic.fallback_stats()
        result["my_asic_fallback_calls"] = sum(stats.values())
        result["my_asic_fallback_ops"] = stats
    result["ms"] = {k: v * 1e3 for k, v in times.items()}
    result["gb_per_s"] = {k: case["bytes"] / v / 1e9 for k, v in times.items()}
    if case.get("flops"):
        result["gflop_per_s"] = {k: case["flops"] / v / 1e9 for k, v in times.items()}
    result["ratios"] = ratios_of(times)
    result["targets"] = check_targets(result, result["ratios"])
    # The same from the fastest call of each variant: what a quiet machine would show.
    result["ratios_from_min"] = ratios_of({k: v[1] for k, v in timed.items()})
    result["targets_from_min"] = check_targets(result, result["ratios_from_min"])
    return result


def ratios_of(times):
    """Speed-ups of ours over eager and compile, ours' fraction of clone's bandwidth, my_asic / cpu time."""
    ratios = {}
    if "ours" in times:
        ratios["ours_vs_eager_speedup"] = times["eager"] / times["ours"]
        if "compile" in times:
            ratios["ours_vs_compile_speedup"] = times["compile"] / times["ours"]
        ratios["ours_fraction_of_clone_bandwidth"] = times["clone"] / times["ours"]
    if "my_asic" in times:
        ratios["my_asic_vs_eager_speedup"] = times["eager"] / times["my_asic"]
        if "ours" in times:
            ratios["my_asic_over_cpu_time"] = times["my_asic"] / times["ours"]
    return ratios


def check_targets(r, ratios):
    """The issue's targets that apply to this row (given its ratios): name -> met (bool)."""
    t = {}
    op = r["op"]
    if "ours_vs_eager_speedup" in ratios:
        if op in MEMORY_BOUND:
            t[">=2.5x eager"] = ratios["ours_vs_eager_speedup"] >= 2.5
            if "ours_vs_compile_speedup" in ratios:
                t[">=1.0x compile"] = ratios["ours_vs_compile_speedup"] >= 1.0
            t[">=0.8x clone"] = ratios["ours_fraction_of_clone_bandwidth"] >= 0.8
        elif op == "decode_attention" and r["shape"].startswith("B=1"):
            need = 3.0 if r["dtype"] == "bfloat16" else 2.0
            t[f">={need:g}x SDPA"] = ratios["ours_vs_eager_speedup"] >= need
        elif op == "prefill_attention":
            t[">=1.0x SDPA"] = ratios["ours_vs_eager_speedup"] >= 1.0
        elif op == "matmul_vec":
            t[">=0.9x torch.mv"] = ratios["ours_vs_eager_speedup"] >= 0.9
    if "my_asic_over_cpu_time" in ratios:
        t["my_asic <=1.1x cpu"] = ratios["my_asic_over_cpu_time"] <= 1.1
    if "my_asic_fallback_calls" in r:
        t["my_asic no fallback"] = r["my_asic_fallback_calls"] == 0
    return t


def parse_thread_counts(text):
    """``"1,4,all"`` -> ``[1, 4, cores]`` (sorted, no repeats); None stays None (torch's default)."""
    if text is None:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    counts = set()
    for part in str(text).split(","):
        part = part.strip()
        if part == "all":
            counts.add(cores)
        elif part.isdigit() and int(part) > 0:
            counts.add(int(part))
        else:
            raise ValueError(f"--threads: {part!r} is not a positive thread count or 'all'")
    return sorted(counts)


# The scaling targets (issue 20): ours' fraction of clone's bandwidth at every
# thread count for the memory-bound kernels, and against PyTorch's best CPU path
# (eager SDPA) for attention.
SCALING_CLONE_FRACTION = 0.85
DECODE_CLONE_FRACTION = 0.7
PREFILL_BF16_VS_SDPA = 1.5


def check_scaling_targets(r, ratios):
    """The scaling targets that apply to this row: name -> met (bool)."""
    t = {}
    if "ours_fraction_of_clone_bandwidth" not in ratios:
        return t
    clone, eager = ratios["ours_fraction_of_clone_bandwidth"], ratios["ours_vs_eager_speedup"]
    if r["op"] in MEMORY_BOUND or r["op"] == "matmul_vec":
        t[f">={SCALING_CLONE_FRACTION:g}x clone"] = clone >= SCALING_CLONE_FRACTION
    elif r["op"] == "decode_attention" and r["dtype"] == "bfloat16":
        t[f">={DECODE_CLONE_FRACTION:g}x clone"] = clone >= DECODE_CLONE_FRACTION
        t[">=1x SDPA"] = eager >= 1.0
    elif r["op"] == "prefill_attention" and r["dtype"] == "bfloat16":
        t[f">={PREFILL_BF16_VS_SDPA:g}x SDPA"] = eager >= PREFILL_BF16_VS_SDPA
    return t


def scaling_misses(results):
    """[op, shape, dtype, threads, target] for every scaling target missed (medians)."""
    return [[r["op"], r["shape"], r["dtype"], r.get("threads"), k]
            for r in results for k, ok in r.get("scaling_targets", {}).items() if not ok]


def print_scaling_table(results, out=sys.stdout):
    """One row per op, shape and dtype; per thread count: of clone / x PyTorch; then the targets missed."""
    counts = sorted({r["threads"] for r in results})
    rows = {}
    for r in results:
        rows.setdefault((r["op"], r["shape"], r["dtype"]), {})[r["threads"]] = r
    header = f"{'op':<19}{'shape':<44}{'dtype':<9}" + "".join(f"{f'{n} thr':>16}" for n in counts) + "  missed"
    print(header, file=out)
    print("-" * len(header), file=out)
    for (op, shape, dtype), by_threads in rows.items():
        cells, misses = "", []
        for n in counts:
            r = by_threads.get(n)
            if r is None or "ours_fraction_of_clone_bandwidth" not in r["ratios"]:
                cells += f"{'-':>16}"
                continue
            ratios = r["ratios"]
            cells += f"{ratios['ours_fraction_of_clone_bandwidth']:>9.2f} /{ratios['ours_vs_eager_speedup']:>5.2f}x"
            misses += [f"{k} @{n}" for k, ok in r["scaling_targets"].items() if not ok]
        print(f"{op:<19}{shape[:43]:<44}{dtype:<9}{cells}  {', '.join(misses) if misses else '-'}", file=out)


# ----------------------------------------------------------------- output

def _num(v, width, precision=2, suffix=""):
    """``v`` right-aligned in ``width`` columns, or "-" when absent."""
    text = "-" if v is None else f"{v:.{precision}f}{suffix}"
    return f"{text:>{width}}"


def print_min_ratios(results, out=sys.stdout):
    """The ratios again from each variant's fastest call (less sensitive to other processes)."""
    print(f"{'op':<19}{'shape':<44}{'dtype':<9}{'thr':>4}{'x eager':>9}{'x comp':>8}{'of clone':>9}{'asic/cpu':>9}"
          f"  missed targets", file=out)
    for r in results:
        ratios = r["ratios_from_min"]
        misses = [k for k, ok in r["targets_from_min"].items() if not ok]
        print(f"{r['op']:<19}{r['shape'][:43]:<44}{r['dtype']:<9}{r.get('threads', ''):>4}"
              f"{_num(ratios.get('ours_vs_eager_speedup'), 9, 2, 'x')}"
              f"{_num(ratios.get('ours_vs_compile_speedup'), 8, 2, 'x')}"
              f"{_num(ratios.get('ours_fraction_of_clone_bandwidth'), 9, 2)}"
              f"{_num(ratios.get('my_asic_over_cpu_time'), 9, 2)}  {', '.join(misses) if misses else 'all met'}",
              file=out)


def print_table(results, out=sys.stdout):
    """One row per op, shape and dtype: times (ms), ours' GB/s, ratios, my_asic fallback calls, missed targets."""
    header = (f"{'op':<19}{'shape':<44}{'dtype':<9}"
              f"{'eager':>9}{'compile':>9}{'ours':>9}{'my_asic':>9}{'clone':>9} |"
              f"{'GB/s':>7}{'x eager':>9}{'x comp':>8}{'of clone':>9}{'asic/cpu':>9}{'fallbk':>7}  missed targets")
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in results:
        ms, ratios = r["ms"], r["ratios"]
        misses = [k for k, ok in r["targets"].items() if not ok]
        fallback = r.get("my_asic_fallback_calls")
        print(f"{r['op']:<19}{r['shape'][:43]:<44}{r['dtype']:<9}"
              f"{_num(ms.get('eager'), 9, 3)}{_num(ms.get('compile'), 9, 3)}{_num(ms.get('ours'), 9, 3)}"
              f"{_num(ms.get('my_asic'), 9, 3)}{_num(ms.get('clone'), 9, 3)} |"
              f"{_num(r['gb_per_s'].get('ours'), 7, 1)}"
              f"{_num(ratios.get('ours_vs_eager_speedup'), 9, 2, 'x')}"
              f"{_num(ratios.get('ours_vs_compile_speedup'), 8, 2, 'x')}"
              f"{_num(ratios.get('ours_fraction_of_clone_bandwidth'), 9, 2)}"
              f"{_num(ratios.get('my_asic_over_cpu_time'), 9, 2)}"
              f"{'-' if fallback is None else fallback:>7}  {', '.join(misses) if misses else 'all met'}", file=out)
        if r.get("gflop_per_s") and r["op"] == "prefill_attention":
            g = r["gflop_per_s"]
            print(f"{'':<19}GFLOP/s: eager {g['eager']:.1f}, compile {_num(g.get('compile'), 1, 1).strip()}, "
                  f"ours {_num(g.get('ours'), 1, 1).strip()}, my_asic {_num(g.get('my_asic'), 1, 1).strip()}", file=out)


def machine_info():
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    llc = kops._C._kp_streaming_stores_min_bytes() if hasattr(kops, "_C") else None
    return {"cpu": model, "logical_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "streaming_stores_min_bytes": llc,
            "torch": torch.__version__, "python": platform.python_version(), "backend_info": kops.backend_info(),
            "environment": {k: os.environ[k] for k in ("KP_CPU_ISA", "KP_NUM_THREADS", "OMP_NUM_THREADS",
                                                                      "KP_STREAMING_STORES_MIN_BYTES")
                            if k in os.environ}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "my_asic", "all"], default="all",
                        help="where ours runs (cpu, my_asic or both; eager, compile and clone always run on cpu)")
    parser.add_argument("--dtypes", default=None, help="comma-separated (default float32,bfloat16; --quick: float32)")
    parser.add_argument("--ops", default=None, help="comma-separated subset of op names")
    parser.add_argument("--quick", action="store_true", help="small shapes, float32, short timing (smoke run)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile (its warm-up is slow)")
    parser.add_argument("--seconds", type=float, default=None, help="timing budget per variant per case (s)")
    parser.add_argument("--threads", default=None,
                        help="thread count(s) for torch.set_num_threads: N, or a list such as 1,4,16 "
                             "('all' = every core this process may use); default: torch's")
    parser.add_argument("--threads-sweep", action="store_true",
                        help="the same as --threads 1,4,all: the scaling table (see above)")
    parser.add_argument("--cpu-allocator", choices=["cached", "system"], default="cached",
                        help="cached: keep freed CPU memory for reuse, as my_asic's allocator does (see above)")
    parser.add_argument("--cache", choices=["hot", "cold"], default="hot",
                        help="hot: the same buffers every call (cache-resident when small); cold: a ring of "
                             "copies >= 2x the last-level cache, so every call reads memory (see above)")
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    try:
        thread_counts = parse_thread_counts("1,4,all" if args.threads_sweep else args.threads)
    except ValueError as e:
        parser.error(str(e))
    allocator = args.cpu_allocator
    if allocator == "cached" and not keep_freed_memory():
        allocator = "system (mallopt unavailable)"

    devices = {"cpu", "my_asic"} if args.device == "all" else {args.device}
    if "my_asic" in devices and (not hasattr(torch, "my_asic") or torch.my_asic.device_count() == 0):
        parser.error("my_asic is not available in this process (see MY_ASIC_ENABLE); use --device cpu")
    dtypes = [getattr(torch, d) for d in (args.dtypes or ("float32" if args.quick else "float32,bfloat16")).split(",")]
    target_s = args.seconds if args.seconds is not None else (0.15 if args.quick else 0.6)
    cases = make_cases(args.quick)
    if args.ops:
        wanted = set(args.ops.split(","))
        unknown = wanted - {c[0] for c in cases}
        if unknown:
            parser.error(f"unknown op(s) {sorted(unknown)}")
        cases = [c for c in cases if c[0] in wanted]
    use_compile = not args.no_compile

    torch.manual_seed(0)
    load_before = os.getloadavg()
    steps_per_case = 1 + use_compile + (args.cache == "cold")
    progress = Progress(len(cases) * len(dtypes) * steps_per_case * len(thread_counts or [None]))
    results = []
    start = time.perf_counter()
    for threads in thread_counts or [None]:
        if threads is not None:
            torch.set_num_threads(threads)
        for dtype in dtypes:
            for op, shape, build in cases:
                r = run_case(op, shape, build, dtype, devices, use_compile, target_s, progress, args.cache)
                r["threads"] = torch.get_num_threads()
                r["scaling_targets"] = check_scaling_targets(r, r["ratios"])
                results.append(r)
                if args.output:  # a run cut short (a time limit) keeps what it measured
                    with open(args.output, "w") as f:
                        json.dump({"partial": True, "results": results}, f, indent=1)
    progress.close()
    wall = time.perf_counter() - start

    info = machine_info()
    info["load_average_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    info["cpu_allocator"] = allocator
    info["cache"] = args.cache
    info["last_level_cache_bytes"] = last_level_cache_bytes()
    thread_text = ", ".join(str(n) for n in sorted({r["threads"] for r in results}))
    print(f"kernel_pytorch.ops benchmark on {info['cpu']} ({info['logical_cores']} logical cores, "
          f"torch {info['torch']}, {thread_text} thread(s)); cpu kernels: {info['backend_info']['cpu']}; "
          f"cpu allocator: {allocator}; caches: {args.cache}")
    print(f"1-minute load average before/after: {info['load_average_before_after']} "
          f"(above the core count, other processes shared the CPU and the figures are noisy)")
    print(f"median ms per call; GB/s = (bytes read + written) / time; x eager / x comp = speed-up of ours; "
          f"of clone = ours' bandwidth / clone's; asic/cpu = my_asic time / cpu time; fallbk = my_asic fallback calls\n")
    for threads in sorted({r["threads"] for r in results}):
        if len(thread_counts or []) > 1:
            print(f"\n{threads} thread(s):")
        print_table([r for r in results if r["threads"] == threads])
    print("\nratios from the fastest call of each variant:")
    print_min_ratios(results)
    if len(thread_counts or []) > 1:
        print("\nscaling with threads (medians): of clone / x PyTorch (eager; SDPA for attention) "
              "at each thread count, and the scaling targets missed")
        print_scaling_table(results)
    misses = [(r["op"], r["shape"], r["dtype"], k) for r in results for k, ok in r["targets"].items() if not ok]
    misses_min = [(r["op"], r["shape"], r["dtype"], k) for r in results
                  for k, ok in r["targets_from_min"].items() if not ok]
    print(f"\n{len(misses)} target(s) missed on medians, {len(misses_min)} on fastest calls; total {wall:.0f} s")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"machine": info, "quick": args.quick, "devices": sorted(devices), "wall_s": wall,
                       "thread_counts": sorted({r["threads"] for r in results}),
                       "scaling_targets_missed": scaling_misses(results),
                       "results": results, "missed_targets": [list(m) for m in misses],
                       "missed_targets_from_min": [list(m) for m in misses_min]}, f, indent=1)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
