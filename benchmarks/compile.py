"""torch.compile on my_asic against compiled CPU and eager my_asic, on a small Llama.

Three variants of the same model (random weights, float32, same threads):

* ``compiled_my_asic`` -- ``torch.compile(model)`` on my_asic (Inductor's C++
  kernels on host-addressable memory; the ``"my_asic"`` backend otherwise);
* ``compiled_cpu``     -- ``torch.compile(model)`` on the CPU;
* ``eager_my_asic``    -- the model on my_asic, not compiled.

Two workloads: ``forward`` (a no-grad forward of one batch, as a prefill or a
decode step without cache) and ``train_step`` (forward, loss, backward, SGD
step). Times are medians over repetitions taken round-robin over the variants
(drift on a shared machine hits all alike), my_asic synchronised after each.
``compile_s`` is the first call's time (tracing + code generation; Inductor's
on-disk cache makes reruns faster: pass --fresh-cache to measure cold builds).
Ratios: ``compiled_my_asic_vs_compiled_cpu`` = cpu time / my_asic time (>=1:
my_asic as fast), ``compiled_vs_eager_my_asic`` = eager time / compiled time.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/compile.py [--quick] [--output compile.json]

On a machine with few cores, run it with OMP_WAIT_POLICY=PASSIVE: Inductor's
OpenMP threads otherwise spin after each kernel and take the cores from the
my_asic runtime's own worker threads (attention kernels on the stream thread,
backward on the autograd device thread). Measured on 2 shared cores: a tiny
Llama forward took 214 ms per call compiled on my_asic with the default
policy, 1.9 ms with PASSIVE (1.7 ms with OMP_NUM_THREADS=1).
"""

import argparse
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tiny model and few repetitions (smoke run)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--fresh-cache", action="store_true", help="cold Inductor cache (a new temporary dir)")
    parser.add_argument("--output", default=None, help="write the JSON here too")
    args = parser.parse_args(argv)
    if args.fresh_cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="kp_compile_bench_")
    repeats = args.repeats or (3 if args.quick else 10)
    ids = torch.randint(0, 256, (2, 32 if args.quick else 128), generator=torch.Generator().manual_seed(1))
    variants = {"compiled_my_asic": ("my_asic", True), "compiled_cpu": ("cpu", True),
                "eager_my_asic": ("my_asic", False)}
    results = {"machine": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
               "torch": torch.__version__, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""), "compile_path": kernel_pytorch.ops.backend_info()["my_asic_compile"],
               "workloads": {}}
    steps = len(variants) * 2 * (repeats + 1)
    done = 0
    # Inductor's first compile in a process pays for importing it: not either variant's cost.
    torch.compile(lambda x: x + 1)(torch.zeros(2))
    for workload in ("forward", "train_step"):
        torch._dynamo.reset()  # (resetting later would drop the other variants' compiled code)
        runners, compile_s, times = {}, {}, {name: [] for name in variants}
        for name, (device, compiled) in variants.items():
            runners[name] = make_runner(build_model(args.quick), device, compiled, workload, ids)
            compile_s[name] = runners[name]()  # first call: compiles (or warms up eager)
            done += 1
            print(f"\r[{done}/{steps}] {workload} {name} first call {compile_s[name]:.1f} s", end="",
                  file=sys.stderr, flush=True)
        for _ in range(repeats):
            for name in variants:
                times[name].append(runners[name]())
                done += 1
                print(f"\r[{done}/{steps}] {workload} timing        ", end="", file=sys.stderr, flush=True)
        median = {name: statistics.median(t) for name, t in times.items()}
        results["workloads"][workload] = {
            "median_ms": {name: round(t * 1e3, 3) for name, t in median.items()},
            "compile_s": {name: round(compile_s[name], 2) for name in ("compiled_my_asic", "compiled_cpu")},
            "compiled_my_asic_vs_compiled_cpu": round(median["compiled_cpu"] / median["compiled_my_asic"], 3),
            "compiled_vs_eager_my_asic": round(median["eager_my_asic"] / median["compiled_my_asic"], 3),
            "compile_time_my_asic_vs_cpu": round(compile_s["compiled_my_asic"] / compile_s["compiled_cpu"], 3),
        }
    print(file=sys.stderr)
    text = json.dumps(results, indent=2)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
