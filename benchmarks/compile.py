"""torch.compile on my_asic against compiled CPU and eager my_asic, on a small Llama.

Three variants of the same model (random weights, float32, same threads:
``--threads`` sets torch's intra-op threads and the simulator's kernel pool):

* ``compiled_my_asic`` -- ``torch.compile(model)`` on my_asic (Inductor's C++
  kernels on host-addressable memory; the ``"my_asic"`` backend otherwise);
* ``compiled_cpu``     -- ``torch.compile(model)`` on the CPU;
* ``eager_my_asic``    -- the model on my_asic, not compiled;
* ``eager_cpu``        -- the model on the CPU, not compiled: a reference only,
  for how much Inductor gains on this machine (``compiled_vs_eager_cpu``).

Two workloads: ``forward`` (a no-grad forward of one batch, as a prefill or a
decode step without cache) and ``train_step`` (forward, loss, backward, SGD
step). Times are medians over repetitions taken round-robin over the variants
(drift on a shared machine hits all alike), my_asic synchronised after each.
``compile_s`` is the median first-call time (tracing, code generation, one run)
of a fresh model after ``torch._dynamo.reset()`` and a garbage collection, over
rounds that alternate the devices' order, after a warm-up round that fills
Inductor's caches for both (so both sides are measured with warm caches;
my_asic's C++ kernels are the CPU's, so on a cold cache whichever compiles first
builds them for both). ``first_compile_s`` is the warm-up round's (cold with
--fresh-cache). ``compile_phases_s``: Dynamo's own timers (medians over the
rounds), to see where a difference comes from.
Ratios: ``compiled_my_asic_vs_compiled_cpu`` = cpu time / my_asic time (>=1:
my_asic as fast), ``compiled_vs_eager_my_asic`` = eager time / compiled time,
``compile_time_my_asic_vs_cpu`` = ratio of the compile-time medians, and
``compile_time_ratio_rounds`` each round's my_asic/CPU ratio (the two compiles
of a round run back to back, so drift of a shared machine mostly cancels; their
median is ``compile_time_ratio_median``).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/compile.py [--quick] [--output compile.json]

On a machine with few cores, run it with OMP_WAIT_POLICY=PASSIVE: Inductor's
OpenMP threads otherwise spin after each kernel, and a backward on my_asic runs
on the autograd engine's device thread with a second OpenMP team, after which
libgomp wakes every team's threads through the kernel (CPU and my_asic alike);
eager my_asic runs attention on the runtime's own threads, which the spinning
threads starve (docs/compile.md, Threads).
"""

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic)
import kernel_pytorch.ops


def build_model(quick):
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=256, hidden_size=64 if quick else 256, num_hidden_layers=2 if quick else 4,
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=128 if quick else 512,
        max_position_embeddings=256)
    return transformers.LlamaForCausalLM(config)


def sync(device):
    if device == "my_asic":
        torch.my_asic.synchronize()


def make_runner(model, device, compiled, workload, ids):
    model = model.to(device)
    ids = ids.to(device)
    fn = torch.compile(model) if compiled else model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def forward():
        with torch.no_grad():
            return fn(input_ids=ids).logits

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = fn(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        return loss

    step = forward if workload == "forward" else train_step

    def run():
        start = time.perf_counter()
        step()
        sync(device)
        return time.perf_counter() - start

    return run


def first_call(model_fn, device, compiled, workload, ids):
    """A fresh model's runner and the time of its first call (compile + one run)."""
    run = make_runner(model_fn(), device, compiled, workload, ids)
    return run, run()


def compile_timers():
    """Dynamo's per-phase compile timers of this process (seconds per phase name)."""
    return getattr(torch._dynamo.utils, "compilation_time_metrics", {})


def main_phases(phases, at_least_s=0.01):
    """Median seconds per phase and variant, for phases that take ``at_least_s`` somewhere."""
    medians = {name: {p: statistics.median(t) for p, t in per.items()} for name, per in phases.items()}
    names = sorted({p for per in medians.values() for p, t in per.items() if t >= at_least_s})
    return {p: {name: round(per.get(p, 0.0), 3) for name, per in medians.items()} for p in names}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model and few repetitions (smoke run)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--compile-rounds", type=int, default=None,
                        help="interleaved compile-time rounds after the warm-up round (default 7, 2 with --quick)")
    parser.add_argument("--threads", type=int, default=None,
                        help="intra-op threads of both devices (torch.set_num_threads and the my_asic runtime's "
                             "kernel pool, KP_NUM_THREADS); default: torch's")
    parser.add_argument("--workloads", default="forward,train_step", help="comma-separated: forward, train_step")
    parser.add_argument("--fresh-cache", action="store_true", help="cold Inductor cache (a new temporary dir)")
    parser.add_argument("--output", default=None, help="write the JSON here too")
    args = parser.parse_args(argv)
    if not hasattr(torch, "my_asic"):
        parser.error("my_asic is not registered in this process (beside a CUDA GPU, set MY_ASIC_ENABLE=1)")
    if args.fresh_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="kp_compile_bench_")
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    # The simulator runs its kernels (eager attention, kernel_pytorch.ops) on its own pool, sized
    # once at its first kernel: the same count as torch's, so both sides use the same threads.
    os.environ.setdefault("KP_NUM_THREADS", str(threads))
    repeats = args.repeats or (3 if args.quick else 10)
    compile_rounds = args.compile_rounds or (2 if args.quick else 7)
    ids = torch.randint(0, 256, (2, 32 if args.quick else 128), generator=torch.Generator().manual_seed(1))
    model_fn = lambda: build_model(args.quick)  # noqa: E731
    variants = {"compiled_my_asic": ("my_asic", True), "compiled_cpu": ("cpu", True),
                "eager_my_asic": ("my_asic", False), "eager_cpu": ("cpu", False)}
    compiled = [name for name, (_, c) in variants.items() if c]
    results = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "threads": threads,
               "KP_NUM_THREADS": os.environ["KP_NUM_THREADS"], "torch": torch.__version__,
               "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
               "compile_path": kernel_pytorch.ops.backend_info()["my_asic_compile"], "workloads": {}}
    workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(workloads) - {"forward", "train_step"}
    if unknown:
        parser.error(f"unknown workloads {sorted(unknown)}: choose from forward, train_step")
    steps = len(workloads) * (len(compiled) * (1 + compile_rounds) + len(variants) * (1 + repeats))
    done = 0

    def progress(text):
        nonlocal done
        done += 1
        print(f"\r[{done}/{steps}] {text:<50}", end="", file=sys.stderr, flush=True)

    # Inductor's first compile in a process pays for importing it; a device's first, for its
    # one-time set-up: neither belongs to the model's compile time. Same tiny function on both.
    for device in ("cpu", "my_asic"):
        torch._dynamo.reset()
        torch.compile(lambda x: x + 1)(torch.zeros(2, device=device))
        sync(device)
    for workload in workloads:
        # Compile time: each variant compiles a fresh model after torch._dynamo.reset(). The
        # warm-up round fills Inductor's caches (and Dynamo's per-process ones) for both; the
        # timed rounds then see warm caches alike, in alternating order.
        first_s, compile_times = {}, {name: [] for name in compiled}
        phases = {name: {} for name in compiled}
        for name in compiled:
            torch._dynamo.reset()
            _, first_s[name] = first_call(model_fn, *variants[name], workload, ids)
            progress(f"{workload} {name} warm-up compile {first_s[name]:.1f} s")
        for r in range(compile_rounds):
            for name in (compiled if r % 2 == 0 else compiled[::-1]):
                torch._dynamo.reset()
                # The last round's garbage (graphs, models, guards) collected now, not
                # by a collection that falls inside one device's timed compile.
                gc.collect()
                compile_timers().clear()
                _, t = first_call(model_fn, *variants[name], workload, ids)
                compile_times[name].append(t)
                for phase, seconds in compile_timers().items():
                    phases[name].setdefault(phase, []).append(sum(seconds))
                progress(f"{workload} {name} compile {t:.1f} s")
        # Run time: all variants side by side (one reset: a later one would drop their code).
        torch._dynamo.reset()
        runners, times = {}, {name: [] for name in variants}
        for name, (device, is_compiled) in variants.items():
            runners[name], t = first_call(model_fn, device, is_compiled, workload, ids)
            progress(f"{workload} {name} first call {t:.1f} s")
        for _ in range(repeats):
            for name in variants:
                times[name].append(runners[name]())
                progress(f"{workload} timing")
        median = {name: statistics.median(t) for name, t in times.items()}
        compile_s = {name: statistics.median(t) for name, t in compile_times.items()}
        round_ratios = [a / b for a, b in zip(compile_times["compiled_my_asic"], compile_times["compiled_cpu"])]
        results["workloads"][workload] = {
            "median_ms": {name: round(t * 1e3, 3) for name, t in median.items()},
            "compile_s": {name: round(t, 3) for name, t in compile_s.items()},
            "compile_rounds_s": {name: [round(t, 3) for t in ts] for name, ts in compile_times.items()},
            "first_compile_s": {name: round(t, 2) for name, t in first_s.items()},
            "compiled_my_asic_vs_compiled_cpu": round(median["compiled_cpu"] / median["compiled_my_asic"], 3),
            "compiled_vs_eager_my_asic": round(median["eager_my_asic"] / median["compiled_my_asic"], 3),
            "compiled_vs_eager_cpu": round(median["eager_cpu"] / median["compiled_cpu"], 3),
            "compile_time_my_asic_vs_cpu": round(compile_s["compiled_my_asic"] / compile_s["compiled_cpu"], 3),
            "compile_time_ratio_rounds": [round(x, 3) for x in round_ratios],
            "compile_time_ratio_median": round(statistics.median(round_ratios), 3),
            "compile_phases_s": main_phases(phases),
        }
        if args.output:  # after each workload: a run cut short keeps what it measured
            with open(args.output, "w") as f:
                f.write(json.dumps(results, indent=2) + "\n")
    print(file=sys.stderr)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
