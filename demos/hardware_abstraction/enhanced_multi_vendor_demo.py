"""The HAL across vendors, each part running real work on this machine's devices.

    python demos/hardware_abstraction/enhanced_multi_vendor_demo.py [--quick] [--parts mesh,placement,...]

1. mesh        Cross-vendor device mesh: the HAL describes one mesh per device type, then
               one model trains data-parallel across processes on different device types
               (the CPU, my_asic, CUDA GPUs where present) with torch.distributed, and every
               rank's weights are compared after each step.
2. placement   Workload placement: the HAL splits a model into pipeline stages over the
               devices by capability; the pipeline's output and gradients are checked
               against a single-device run.
3. performance The same workloads (a matmul, kernel library ops where the build has them,
               a training step) timed on every device, achieved TFLOPS beside the HAL's peak.
4. monitor     Real-time capability analysis: free memory and utilisation sampled live while
               a workload runs (NVML on NVIDIA, my_asic memory statistics, the host's
               /proc counters): a refreshing display on a terminal, plain lines otherwise.
               Each accelerator has a MemoryMonitor (warning 90%, critical 95%) and the
               HAL's device error handler lists device errors (an out-of-memory
               allocation on my_asic empties the cache and is retried once).

Gradients cross device types through CPU tensors on gloo.  Within one device type a
device-native backend is used where torch.distributed has one registered: ``myccl`` for
my_asic (the process group is then ``cpu:gloo,my_asic:myccl``).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List, Optional, Sequence

import torch

import kernel_pytorch
from kernel_pytorch.distributed_scale import HardwareAdapter
from kernel_pytorch.hardware_abstraction.hal_core import DeviceSpec, HardwareVendor
from kernel_pytorch.hardware_abstraction.error_handler import set_error_handler
from kernel_pytorch.hardware_abstraction.memory_monitor import MemoryEvent, MemoryMonitor
from kernel_pytorch.hardware_abstraction.measurement import (
    measure_copy_bandwidth, measure_matmul, measure_opencl_matmul, small_mlp, time_call, time_interleaved,
    training_step,
)

PARTS = ("mesh", "placement", "performance", "monitor")


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def runnable_devices(adapter: HardwareAdapter, one_per_simulator: bool = True) -> List[DeviceSpec]:
    """Torch-usable devices, real ones first; of identical simulated devices only the first."""
    real = [s for s in adapter.devices if s.torch_usable and not s.is_simulated]
    simulated = [s for s in adapter.devices if s.torch_usable and s.is_simulated]
    if one_per_simulator:
        simulated = simulated[:1]
    return real + simulated


# ============================================================================ 1. mesh
def mesh_ranks(adapter: HardwareAdapter, quick: bool) -> List[str]:
    """One process per device: the CPU, my_asic device(s), every CUDA GPU."""
    ranks = ["cpu"]
    asic = [str(s.device) for s in adapter.devices if s.vendor is HardwareVendor.CUSTOM_ASIC]
    if not asic and kernel_pytorch._EXTENSION_PROBLEM is None and torch.cuda.is_available():
        # Beside CUDA my_asic is not registered in this process (pytorch issue 161129); a
        # process of its own registers it with MY_ASIC_ENABLE=1 and touches no CUDA tensor.
        asic = ["my_asic:0"]
    ranks += asic[:1] if quick else asic[:2]
    ranks += [f"cuda:{i}" for i in range(torch.cuda.device_count())][: 1 if quick else None]
    return ranks


def part_mesh(adapter: HardwareAdapter, quick: bool) -> None:
    import torch.distributed as dist

    section("1. Cross-vendor device mesh: data-parallel training across device types")
    for mesh in adapter.device_mesh_description():
        print(f"   HAL mesh: {mesh}")
    ranks = mesh_ranks(adapter, quick)
    steps = 5 if quick else 20
    print(f"   launching {len(ranks)} processes, one per device: {', '.join(ranks)}; {steps} SGD steps")
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = []
        for rank, device in enumerate(ranks):
            env = dict(os.environ, OMP_NUM_THREADS="1")
            if device.startswith("my_asic"):
                env["MY_ASIC_ENABLE"] = "1"
            out = os.path.join(tmp, f"rank{rank}.json")
            # One backend decision for every rank: ranks beside a GPU do not register
            # my_asic (and so not myccl) unless asked, so they cannot decide alone.
            spec = json.dumps({"rank": rank, "ranks": ranks, "store": store, "steps": steps, "out": out,
                               "myccl": "myccl" in dist.Backend.backend_list})
            procs.append((subprocess.Popen([sys.executable, os.path.abspath(__file__), "--mesh-worker", spec],
                                           env=env), out))
        deadline = time.monotonic() + 240
        failed = []
        for proc, _ in procs:
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.returncode != 0:
                failed.append(proc.returncode)
        if failed:
            raise SystemExit(f"mesh training failed: worker exit codes {failed}")
        results = [json.load(open(out)) for _, out in procs]
    first = results[0]
    print(f"   collectives: {first['backend']} ({first['transport']})")
    for step, (loss, diff) in enumerate(zip(first["losses"], first["max_weight_diff"])):
        print(f"   step {step}: global loss {loss:.5f}, max |w_rank - w_0| over all ranks {diff:.3g}")
    tolerance = first["tolerance"]
    worst = max(first["max_weight_diff"])
    verdict = "bitwise identical" if worst == 0 else f"equal within {tolerance:g} (max {worst:.3g})"
    print(f"   every rank held the same weights after every step: {verdict}")
    for result in results:
        print(f"     rank {result['rank']} on {result['device']}: {result['step_ms']:.1f} ms/step")
    if worst > tolerance:
        raise SystemExit(f"ranks diverged: max weight difference {worst} > {tolerance}")
    if not first["losses"][-1] < first["losses"][0]:
        raise SystemExit("mesh training did not reduce the loss")


def _device_type(name: str) -> str:
    """"my_asic:0" -> "my_asic", without torch.device: a rank beside a GPU may not have my_asic registered."""
    return name.split(":")[0]


def mesh_worker(spec: Dict) -> None:
    """One rank of :func:`part_mesh` (run in its own process)."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    rank, ranks = spec["rank"], spec["ranks"]
    world = len(ranks)
    device = torch.device(ranks[rank])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    elif device.type == "my_asic":
        torch.my_asic.set_device(device)
    myccl = spec["myccl"]
    backend = "cpu:gloo,my_asic:myccl" if myccl else "gloo"
    dist.init_process_group(backend, init_method=f"file://{spec['store']}", rank=rank, world_size=world)
    types = list(dict.fromkeys(_device_type(d) for d in ranks))
    type_groups = {t: dist.new_group([r for r, d in enumerate(ranks) if _device_type(d) == t]) for t in types}
    members = [r for r, d in enumerate(ranks) if _device_type(d) == device.type]
    leaders = [next(r for r, d in enumerate(ranks) if _device_type(d) == t) for t in types]
    leader_group = dist.new_group(leaders)
    if myccl:
        # torch.distributed leaves a "cpu:gloo,my_asic:myccl" group's default backend unset
        # (and warns about it on every rank at destroy_process_group): set it.
        from kernel_pytorch.asic.distributed import set_default_backend

        for group in [None, leader_group, *type_groups.values()]:
            set_default_backend(group)
    # Collectives run on the device where its type has a backend of its own.
    native = device.type == "cpu" or (device.type == "my_asic" and myccl)

    def collective(tensor: torch.Tensor, op, **kwargs) -> None:
        buffer = tensor if native else tensor.cpu()
        op(buffer, **kwargs)
        if buffer is not tensor:
            tensor.copy_(buffer)

    def all_reduce_mean(flat: torch.Tensor) -> None:
        if len(members) > 1:
            collective(flat, dist.all_reduce, group=type_groups[device.type])
        if len(leaders) > 1:
            if rank in leaders:
                buffer = flat.cpu()
                dist.all_reduce(buffer, group=leader_group)
                flat.copy_(buffer)
            if len(members) > 1:
                collective(flat, dist.broadcast, src=members[0], group=type_groups[device.type])
        flat.div_(world)

    torch.manual_seed(0)
    model = small_mlp(64, depth=2).to(device)
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(64 * world, 64, generator=generator)
    targets = torch.bucketize(inputs[:, 0].contiguous(), torch.tensor([-0.67, 0.0, 0.67]))
    shard = slice(64 * rank, 64 * (rank + 1))
    x, y = inputs[shard].to(device), targets[shard].to(device)
    losses, diffs, step_s = [], [], []
    for _ in range(spec["steps"]):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        all_reduce_mean(flat)
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        optimizer.step()
        step_s.append(time.perf_counter() - start)
        weights = torch.cat([p.detach().reshape(-1) for p in params]).cpu()
        gathered = [torch.empty_like(weights) for _ in range(world)]
        dist.all_gather(gathered, weights)
        diffs.append(max(float((w - gathered[0]).abs().max()) for w in gathered))
        global_loss = loss.detach().cpu().reshape(1)
        dist.all_reduce(global_loss)
        losses.append(float(global_loss) / world)
    dist.destroy_process_group()
    # The CPU and my_asic (which runs the CPU's kernels) update bitwise alike; a GPU's
    # kernels round differently (fused multiply-add), so its ranks agree to a tolerance.
    host_only = all(_device_type(d) in ("cpu", "my_asic") for d in ranks)
    with open(spec["out"], "w") as out:
        json.dump({
            "rank": rank, "device": str(device), "losses": losses, "max_weight_diff": diffs,
            "tolerance": 0.0 if host_only else 1e-5,
            "step_ms": 1e3 * sorted(step_s)[len(step_s) // 2],
            "backend": backend,
            "transport": ("my_asic gradients reduced on device by myccl, across device types on CPU tensors by gloo"
                          if myccl else "gloo; non-CPU gradients move through CPU tensors"),
        }, out)


# ======================================================================= 2. placement
def part_placement(adapter: HardwareAdapter, quick: bool) -> None:
    section("2. Workload placement: pipeline stages over devices by capability")
    width, depth = (128, 6) if quick else (512, 12)
    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()) for _ in range(depth)]
    # Memory of a stage in training: weights + gradients + AdamW's two moments, fp32.
    stage_gb = [4 * 4 * sum(p.numel() for p in block.parameters()) / 1e9 for block in blocks]
    devices = [s for s in adapter.devices if s.torch_usable]
    placement = adapter.place_model_stages(stage_gb, dtype="fp32")
    for stage in placement:
        print(f"   {stage}")
    used = list(dict.fromkeys(str(s.device.device) for s in placement))
    print(f"   {len(blocks)} stages over {len(used)} of {len(devices)} usable device(s): {', '.join(used)}")
    single = copy.deepcopy(torch.nn.Sequential(*blocks))  # the reference: every stage on the CPU
    staged = [copy.deepcopy(block).to(stage.device.device) for block, stage in zip(blocks, placement)]
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(32, width, generator=generator)

    def pipeline(inputs: torch.Tensor) -> torch.Tensor:
        for block, stage in zip(staged, placement):
            inputs = block(inputs.to(stage.device.device))
        return inputs

    microbatches = 4
    start = time.perf_counter()
    with torch.no_grad():
        outputs = torch.cat([pipeline(chunk).cpu() for chunk in x.chunk(microbatches)])
    elapsed = time.perf_counter() - start
    expected = single(x)
    out_diff = float((outputs - expected.detach()).abs().max())
    # Gradients through the device boundaries too.
    loss = pipeline(x).square().mean()
    loss.backward()
    expected.square().mean().backward()
    grad_diff = max(float((a.weight.grad.cpu() - b[0].weight.grad).abs().max())
                    for a, b in zip((blk[0] for blk in staged), single))
    # my_asic runs the CPU's kernels, so a CPU/my_asic pipeline differs from one CPU only
    # where micro-batching changes a matmul's blocking (last-bit rounding); a GPU's matmuls
    # also sum in another order.
    host_only = all(s.device.device.type in ("cpu", "my_asic") for s in placement)
    tolerance = 1e-6 if host_only else 1e-4
    print(f"   pipeline ({microbatches} micro-batches, {elapsed * 1e3:.1f} ms) vs one CPU: "
          f"max |output diff| {out_diff:.3g}, max |weight grad diff| {grad_diff:.3g}")
    if out_diff > tolerance or grad_diff > tolerance:
        raise SystemExit(f"pipeline disagrees with the single-device run (tolerance {tolerance})")
    print(f"   pipeline output and gradients match the single-device run (tolerance {tolerance:g})")


# ===================================================================== 3. performance
def kernel_library_ops():
    """(name, fn(x), reference(x)) for kernel_pytorch's op library, where this build has it."""
    namespace = getattr(torch.ops, "kernel_pytorch", None)
    found = []
    try:
        rms = namespace.rms_norm
        found.append(("kernel_pytorch.rms_norm", lambda x, w: rms(x, w, 1e-6),
                      lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w))
    except (AttributeError, RuntimeError):
        pass
    try:
        silu_and_mul = namespace.silu_and_mul
        found.append(("kernel_pytorch.silu_and_mul", lambda x, w: silu_and_mul(x),
                      lambda x, w: torch.nn.functional.silu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2:]))
    except (AttributeError, RuntimeError):
        pass
    return found


def part_performance(adapter: HardwareAdapter, quick: bool) -> List[dict]:
    section("3. Performance comparison: the same workloads on every device")
    n = 512 if quick else 2048
    budget = 0.15 if quick else 0.5
    rows = []
    # The training step decides which device is fastest, so it is timed the noise-robust
    # way: warm-up, devices interleaved in rounds, the median and its round-to-round spread.
    steps = time_interleaved({spec.label: (training_step(spec.device), spec.device) for spec in runnable_devices(adapter)},
                             rounds=5 if quick else 8, budget_s=0.4 if quick else 1.5, warmup_s=0.2)
    for spec in runnable_devices(adapter):
        device = spec.device
        matmul_n = n if device.type in ("cpu", "my_asic") else 4096
        mm = measure_matmul(device, matmul_n, torch.float32, spec, budget)
        row = {"device": spec.label, "name": spec.name, "matmul_n": matmul_n, "fp32_tflops": mm.achieved_tflops,
               "fp32_peak": mm.peak_tflops, "fp32_efficiency": mm.efficiency}
        if device.type == "cuda":
            bf16 = measure_matmul(device, 8192 if not quick else 4096, torch.bfloat16, spec, budget)
            row.update(bf16_tflops=bf16.achieved_tflops, bf16_peak=bf16.peak_tflops, bf16_efficiency=bf16.efficiency)
        copies = measure_copy_bandwidth(device, (16 if quick else 256) * 2**20, budget)
        row.update(h2d_gbps=copies.host_to_device_gbps, d2h_gbps=copies.device_to_host_gbps)
        row["train_step_ms"] = steps[spec.label].median_s * 1e3
        row["train_step_range_ms"] = (steps[spec.label].low_s * 1e3, steps[spec.label].high_s * 1e3)
        rows.append(row)
    opencl = [s for s in adapter.devices if s.vendor is HardwareVendor.OPENCL]
    for spec in opencl[:1] if quick else opencl:
        try:
            mm = measure_opencl_matmul(spec, 256 if quick else 1024, budget)
        except Exception as error:  # an OpenCL driver failing must not end the demo
            print(f"   {spec.label}: OpenCL matmul not measured: {error}")
            continue
        rows.append({"device": spec.label, "name": spec.name, "matmul_n": mm.n, "fp32_tflops": mm.achieved_tflops,
                     "fp32_peak": mm.peak_tflops, "fp32_efficiency": mm.efficiency})
    print(f"   {'device':<10} {'matmul':>7} {'fp32 TFLOPS':>12} {'peak':>8} {'eff.':>6} "
          f"{'H2D GB/s':>9} {'D2H GB/s':>9} {'train step: median [round range]':>32}")
    for row in rows:
        peak = f"{row['fp32_peak']:.2f}" if row["fp32_peak"] else "?"
        eff = f"{row['fp32_efficiency']:.0%}" if row["fp32_efficiency"] else "?"
        h2d = f"{row['h2d_gbps']:.1f}" if "h2d_gbps" in row else "-"
        d2h = f"{row['d2h_gbps']:.1f}" if "d2h_gbps" in row else "-"
        step = (f"{row['train_step_ms']:.2f} ms [{row['train_step_range_ms'][0]:.1f}-{row['train_step_range_ms'][1]:.1f}]"
                if "train_step_ms" in row else "-")
        print(f"   {row['device']:<10} {row['matmul_n']:>7} {row['fp32_tflops']:>12.4f} {peak:>8} {eff:>6} "
              f"{h2d:>9} {d2h:>9} {step:>32}")
        if "bf16_tflops" in row:
            print(f"   {'':<10} {'bf16':>7} {row['bf16_tflops']:>12.1f} {row['bf16_peak'] or 0:>8.1f} "
                  f"{(row['bf16_efficiency'] or 0):>6.0%}")
    print("   (OpenCL runs an OpenCL C matmul through pyopencl: torch has no OpenCL device; "
          "the CPU's copy figures are host memcpy; train step: median of devices interleaved in rounds, "
          "[fastest - slowest round's median] ms)")
    ops = kernel_library_ops()
    if not ops:
        print("   kernel library ops: torch.ops.kernel_pytorch is not part of this build; skipped")
    for name, fn, reference in ops:
        for spec in runnable_devices(adapter):
            device = spec.device
            x = torch.randn(256, 4096, generator=torch.Generator().manual_seed(0)).to(device)
            w = torch.ones(4096 if "rms" in name else 2048).to(device)
            try:
                got = fn(x, w)
            except (NotImplementedError, RuntimeError) as error:
                print(f"   {name} on {spec.label}: not implemented ({str(error).splitlines()[0]})")
                continue
            ok = torch.allclose(got.cpu(), reference(x.cpu(), w.cpu()), rtol=1e-4, atol=1e-5)
            ms = time_call(lambda: fn(x, w), device, budget).best_s * 1e3
            print(f"   {name} on {spec.label}: {ms:.3f} ms, matches eager torch: {ok}")
    return rows


# ========================================================================= 4. monitor
class HostCounters:
    """CPU utilisation (% of all cores, from /proc/stat) and MemAvailable (GB)."""

    def __init__(self) -> None:
        self._last = self._cpu_times()

    @staticmethod
    def _cpu_times():
        try:
            with open("/proc/stat") as stat:
                fields = [float(v) for v in stat.readline().split()[1:]]
        except OSError:
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
        return idle, sum(fields)

    def sample(self) -> str:
        now = self._cpu_times()
        util = "?"
        if now and self._last and now[1] > self._last[1]:
            util = f"{100 * (1 - (now[0] - self._last[0]) / (now[1] - self._last[1])):.0f}%"
        self._last = now
        available = "?"
        try:
            with open("/proc/meminfo") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        available = f"{int(line.split()[1]) * 1024 / 1e9:.2f} GB"
        except OSError:
            pass
        return f"util {util:>4}, {available} available"


def _nvml_sampler(index: int):
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as error:  # no NVML: the row says so instead of failing the demo
        return lambda: f"NVML unavailable ({error})"

    def sample() -> str:
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        util = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return f"util {util.gpu:>3}%, {memory.free / 1e9:.2f} GB free of {memory.total / 1e9:.1f}"

    return sample


def _asic_sampler(index: int):
    def sample() -> str:
        free, total = torch.my_asic.mem_get_info(index)
        return (f"{free / 1e9:.3f} GB free of {total / 1e9:.1f}, "
                f"{torch.my_asic.memory_allocated(index) / 2**20:.1f} MiB allocated here")
    return sample


def part_monitor(adapter: HardwareAdapter, quick: bool, interactive: bool) -> None:
    section("4. Real-time capability analysis: live memory and utilisation under load")
    host = HostCounters()
    samplers = [("host", host.sample)]
    for spec in runnable_devices(adapter, one_per_simulator=False):
        if spec.device.type == "my_asic":
            samplers.append((spec.label, _asic_sampler(spec.index)))
        elif spec.device.type == "cuda":
            samplers.append((spec.label, _nvml_sampler(spec.capabilities.details.get("nvml_index", spec.index))))
    workload_devices = [s.device for s in runnable_devices(adapter)]
    seconds_each = 1.5 if quick else 5.0
    state = {"running": "starting", "done": False}
    lines_drawn = [0]

    # The HAL's memory monitor (warning 90%, critical 95%; checked on a timer
    # and, on my_asic, on the allocation path) and device error handler: their
    # events are listed under the samples.
    events: list = []

    def note_memory(event: MemoryEvent) -> None:
        events.append(f"{event.device} memory {event.level}: {100 * event.fraction:.1f}% used "
                      f"(peak {event.peak_bytes / 2**30:.2f} GiB)")

    def note_error(error) -> bool:
        events.append(f"{error.device} {error.kind} error in {error.op}: {error.message.splitlines()[0]}")
        if error.kind == "out_of_memory" and error.device.startswith("my_asic"):
            torch.my_asic.empty_cache()
            return True  # retry the allocation once
        return False

    monitors = [MemoryMonitor(d, warning=0.90, critical=0.95, interval_s=0.25, on_warning=note_memory,
                              on_critical=note_memory, on_normal=note_memory)
                for d in workload_devices if d.type in ("my_asic", "cuda")]
    set_error_handler(note_error)
    for monitor in monitors:
        monitor.start()

    def draw(elapsed: float) -> None:
        rows = [f"t={elapsed:5.1f}s  workload: {state['running']}"]
        rows += [f"  {name:<10} {sample()}" for name, sample in samplers]
        rows += [f"  monitor    {m.device}: {m.level}, peak {m.peak_bytes / 2**30:.2f} GiB" for m in monitors]
        rows += [f"  event      {e}" for e in events[-3:]]
        if interactive:
            if lines_drawn[0]:
                sys.stdout.write(f"\x1b[{lines_drawn[0]}F")  # back to the first line drawn
            sys.stdout.write("".join(f"\x1b[2K{row}\n" for row in rows))
            lines_drawn[0] = len(rows)
        else:
            print(" | ".join(r.strip() for r in rows), flush=True)
        sys.stdout.flush()

    def sampler_loop() -> None:
        start = time.perf_counter()
        period = 0.25 if interactive else 0.5
        while not state["done"]:
            draw(time.perf_counter() - start)
            time.sleep(period)
        draw(time.perf_counter() - start)

    thread = threading.Thread(target=sampler_loop, daemon=True)
    thread.start()
    for device in workload_devices:
        state["running"] = f"training + 1024^2 matmuls on {device}"
        torch.manual_seed(0)
        model = small_mlp(512, depth=4).to(device)
        optimizer = torch.optim.AdamW(model.parameters())
        x = torch.randn(256, 512).to(device)
        held = []
        end = time.perf_counter() + seconds_each
        while time.perf_counter() < end:
            optimizer.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            optimizer.step()
            held.append(torch.randn(1024, 1024, device=device) @ torch.randn(1024, 1024, device=device))
            held = held[-16:]  # up to 64 MiB live: visible in the memory columns
        del held, model, optimizer
    state["running"] = "finished"
    state["done"] = True
    thread.join()
    for monitor in monitors:
        monitor.stop()
    set_error_handler(None)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes and few steps (under a minute on 2 cores)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--mesh-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mesh_worker:
        mesh_worker(json.loads(args.mesh_worker))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    started = time.perf_counter()
    adapter = HardwareAdapter(enable_hal=True)
    print("devices: " + "; ".join(str(spec) for spec in adapter.devices))
    if "mesh" in parts:
        part_mesh(adapter, args.quick)
    if "placement" in parts:
        part_placement(adapter, args.quick)
    if "performance" in parts:
        part_performance(adapter, args.quick)
    if "monitor" in parts:
        part_monitor(adapter, args.quick, interactive=sys.stdout.isatty())
    print(f"\ndone in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
