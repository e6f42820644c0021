"""Hardware Abstraction Layer benchmark: what the HAL costs, what the devices achieve,
and whether the HAL's pick is the fastest device, all measured in one run.

    python benchmarks/hardware_abstraction_benchmark.py [--quick] [--output FILE.json] [--plot FILE.png]

1. HAL costs beside baselines measured in the same run:
   ``import kernel_pytorch.hardware_abstraction`` after ``import torch`` (fresh
   interpreters; ``import torch`` itself is the baseline), cold discovery (a new
   ``HardwareAbstractionLayer().discover()``), cached discovery, one
   ``get_optimal_device_hal`` selection, ``get_cross_vendor_capabilities``; against
   ``torch.cuda.device_count()``, ``torch.accelerator.device_count()`` /
   ``current_accelerator()`` and a naive "first accelerator else CPU" pick.
2. Per device (the CPU, my_asic, OpenCL through pyopencl, every GPU torch sees):
   achieved fp32 matmul TFLOPS against the HAL's theoretical peak (efficiency), host <-> device
   copy bandwidth, and one training step of a small MLP.
3. Selection quality: the training step's time on every device, and whether the device
   the HAL picks for it (default rules, no vendor preference) is the fastest; the legacy
   ``HardwareAdapter()`` pick and the naive pick are scored the same way.

A progress bar on stderr shows what is being measured.  ``--output`` writes the results
as JSON (schema below and in docs/benchmarks.md), ``--plot`` draws them as a PNG
(needs matplotlib).

JSON schema (``"schema": "kernel_pytorch.hal_benchmark/1"``)::

    schema              str    "kernel_pytorch.hal_benchmark/1"
    created_utc         str    ISO 8601 time of the run
    quick               bool   --quick sizes
    machine             object platform, python, torch, kernel_pytorch versions; cpu_model,
                               logical_cpus, torch_num_threads, memory_total_gb (GB = 1e9 bytes),
                               load_average_1m (before the run; >= logical_cpus means the
                               figures were taken on a busy machine), devices (the HAL's
                               get_cross_vendor_capabilities()["cross_vendor_devices"]),
                               unavailable_vendors
    hal_costs           list   {name, seconds (median, per call), samples, kind: "hal"|"baseline"}
    devices             list   {device, name, simulated, matmul: {n, dtype, seconds, achieved_tflops,
                               peak_tflops, efficiency}, copy: {nbytes, host_to_device_gbps,
                               device_to_host_gbps, pinned} | null, train_step_s | null}
    selection_quality   object {workload, times_s: {device: s}, fastest, picks: {hal, legacy,
                               naive: {device, seconds, slowdown_vs_fastest}}, hal_pick_is_fastest}
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from typing import Callable, Dict, List, Optional

import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA = "kernel_pytorch.hal_benchmark/1"

_IMPORT_RUN = r"""
import json, time
start = time.perf_counter()
import torch
after_torch = time.perf_counter()
import kernel_pytorch.hardware_abstraction
done = time.perf_counter()
print(json.dumps({"import_torch_s": after_torch - start, "import_hal_s": done - after_torch}))
"""


class Progress:
    """A plain-text progress bar on stderr: redrawn in place on a terminal, one line per
    step otherwise (CI logs)."""

    def __init__(self, total: int, stream=sys.stderr, width: int = 30) -> None:
        self.total, self.done, self.stream, self.width = total, 0, stream, width
        self.tty = stream.isatty()
        self.started = time.perf_counter()

    def step(self, label: str) -> None:
        """Announce the next measurement (call before it runs)."""
        filled = int(self.width * self.done / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        line = f"[{bar}] {self.done}/{self.total} {time.perf_counter() - self.started:5.1f}s {label}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + line[:120])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.done += 1

    def close(self) -> None:
        bar = "#" * self.width
        line = f"[{bar}] {self.total}/{self.total} {time.perf_counter() - self.started:5.1f}s done"
        self.stream.write(("\r\x1b[2K" + line + "\n") if self.tty else line + "\n")
        self.stream.flush()


def per_call_seconds(fn: Callable[[], object], budget_s: float) -> Dict[str, float]:
    """Median seconds per call over repeats of ``number`` calls sized to ``budget_s``."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    repeats = max(3, int(budget_s / max(1e-9, timer.timeit(number))))
    samples = [t / number for t in timer.repeat(repeat=min(repeats, 15), number=number)]
    return {"seconds": statistics.median(samples), "samples": len(samples) * number}


def machine_description() -> Dict[str, object]:
    from kernel_pytorch.distributed_scale import HardwareAdapter

    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    memory = None
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9
    except (ValueError, OSError, AttributeError):
        pass
    capabilities = HardwareAdapter(enable_hal=True).get_cross_vendor_capabilities()
    import kernel_pytorch

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "kernel_pytorch": kernel_pytorch.__version__,
        "cpu_model": cpu_model,
        "logical_cpus": os.cpu_count(),
        "torch_num_threads": torch.get_num_threads(),
        "memory_total_gb": memory,
        "load_average_1m": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "devices": capabilities["cross_vendor_devices"],
        "unavailable_vendors": capabilities["unavailable_vendors"],
    }


def hal_costs(progress: Progress, import_runs: int, budget_s: float) -> List[dict]:
    from kernel_pytorch.distributed_scale import HardwareAdapter
    from kernel_pytorch.hardware_abstraction import HardwareAbstractionLayer

    rows: List[dict] = []
    samples = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    for run in range(import_runs):
        progress.step(f"fresh interpreter {run + 1}/{import_runs}: import torch, then the HAL")
        result = subprocess.run([sys.executable, "-c", _IMPORT_RUN], capture_output=True, text=True,
                                env=env, cwd=REPO_ROOT, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"import run failed:\n{result.stderr}")
        samples.append(json.loads(result.stdout.strip().splitlines()[-1]))
    rows.append({"name": "import torch", "kind": "baseline", "samples": import_runs,
                 "seconds": statistics.median(s["import_torch_s"] for s in samples)})
    rows.append({"name": "import kernel_pytorch.hardware_abstraction (after torch)", "kind": "hal",
                 "samples": import_runs, "seconds": statistics.median(s["import_hal_s"] for s in samples)})

    progress.step("cold discovery: HardwareAbstractionLayer().discover()")
    cold = []
    for _ in range(3):
        start = time.perf_counter()
        HardwareAbstractionLayer().discover()
        cold.append(time.perf_counter() - start)
    rows.append({"name": "cold discovery (new HAL, every adapter probes)", "kind": "hal",
                 "samples": len(cold), "seconds": statistics.median(cold)})

    adapter = HardwareAdapter(enable_hal=True)
    adapter.devices
    measured = [
        ("cached discovery (hal.discover())", "hal", lambda: adapter.hal.discover()),
        ("get_optimal_device_hal (cached)", "hal",
         lambda: adapter.get_optimal_device_hal(memory_requirement_gb=1, compute_requirement_tflops=0.01)),
        ("get_cross_vendor_capabilities", "hal", adapter.get_cross_vendor_capabilities),
        ("torch.cuda.device_count()", "baseline", torch.cuda.device_count),
        ("torch.accelerator.device_count()", "baseline", torch.accelerator.device_count),
        ("torch.accelerator.current_accelerator()", "baseline", torch.accelerator.current_accelerator),
        ("naive pick: first accelerator else cpu", "baseline", naive_pick),
    ]
    for name, kind, fn in measured:
        progress.step(name)
        rows.append({"name": name, "kind": kind, **per_call_seconds(fn, budget_s)})
    return rows


def naive_pick() -> torch.device:
    """What scripts without a HAL do: the current accelerator's device 0, else the CPU."""
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return torch.device(accelerator.type, 0) if accelerator is not None else torch.device("cpu")


def runnable(adapter) -> list:
    """Torch-usable devices to measure (one of several identical simulated devices)."""
    real = [s for s in adapter.devices if s.torch_usable and not s.is_simulated]
    simulated = [s for s in adapter.devices if s.torch_usable and s.is_simulated]
    return real + simulated[:1]


def device_measurements(progress: Progress, adapter, quick: bool, budget_s: float) -> List[dict]:
    from kernel_pytorch.hardware_abstraction.hal_core import HardwareVendor
    from kernel_pytorch.hardware_abstraction.measurement import (
        measure_copy_bandwidth, measure_matmul, measure_opencl_matmul, measure_training_step,
    )

    rows = []
    for spec in runnable(adapter):
        device = spec.device
        host_like = device.type in ("cpu", "my_asic")
        n = (512 if quick else 2048) if host_like else (4096 if quick else 8192)
        progress.step(f"{spec.label}: {n}x{n} fp32 matmul")
        mm = measure_matmul(device, n, torch.float32, spec, budget_s)
        nbytes = (16 if quick else 256) * 2**20
        progress.step(f"{spec.label}: copy bandwidth, {nbytes >> 20} MiB")
        copy = measure_copy_bandwidth(device, nbytes, budget_s)
        rows.append({
            "device": spec.label, "name": spec.name, "simulated": spec.is_simulated,
            "matmul": {"n": n, "dtype": mm.dtype, "seconds": mm.seconds, "achieved_tflops": mm.achieved_tflops,
                       "peak_tflops": mm.peak_tflops, "efficiency": mm.efficiency},
            "copy": {"nbytes": nbytes, "host_to_device_gbps": copy.host_to_device_gbps,
                     "device_to_host_gbps": copy.device_to_host_gbps, "pinned": copy.pinned},
            "train_step_s": None,
        })
    opencl = [s for s in adapter.devices if s.vendor is HardwareVendor.OPENCL]
    for spec in opencl:
        n = 256 if quick else 1024
        progress.step(f"{spec.label}: {n}x{n} fp32 matmul (OpenCL C kernel via pyopencl)")
        try:
            mm = measure_opencl_matmul(spec, n, budget_s)
        except Exception as error:  # a broken OpenCL driver must not end the benchmark
            rows.append({"device": spec.label, "name": spec.name, "simulated": False, "matmul": None,
                         "copy": None, "train_step_s": None, "error": str(error)})
            continue
        rows.append({
            "device": spec.label, "name": spec.name, "simulated": False,
            "matmul": {"n": n, "dtype": "fp32", "seconds": mm.seconds, "achieved_tflops": mm.achieved_tflops,
                       "peak_tflops": mm.peak_tflops, "efficiency": mm.efficiency},
            "copy": None, "train_step_s": None,
        })
    return rows


def selection_quality(progress: Progress, adapter, rows: List[dict], budget_s: float) -> dict:
    from kernel_pytorch.distributed_scale import HardwareAdapter
    from kernel_pytorch.hardware_abstraction.measurement import measure_training_step

    times: Dict[str, float] = {}
    for spec in runnable(adapter):
        progress.step(f"{spec.label}: training step (MLP 256x4, batch 64, AdamW)")
        times[str(spec.device)] = measure_training_step(spec.device, min_time_s=budget_s).best_s
        for row in rows:
            if row["device"] == spec.label:
                row["train_step_s"] = times[str(spec.device)]
    # Other simulated devices are identical to the one measured.
    for spec in adapter.devices:
        if spec.is_simulated and str(spec.device) not in times:
            first = next(s for s in runnable(adapter) if s.is_simulated)
            times[str(spec.device)] = times[str(first.device)]
    fastest = min(times, key=times.get)
    hal = adapter.get_optimal_device_hal(memory_requirement_gb=0.1, compute_requirement_tflops=0.0, dtype="fp32")
    legacy = HardwareAdapter().get_optimal_device_placement(memory_gb=0.1)
    picks = {"hal": str(hal.device) if hal else None, "legacy": str(legacy[0]) if legacy else None,
             "naive": str(naive_pick())}

    def scored(device: Optional[str]) -> dict:
        seconds = times.get(device) if device else None
        return {"device": device, "seconds": seconds,
                "slowdown_vs_fastest": None if seconds is None else seconds / times[fastest]}

    return {
        "workload": "one training step: MLP width 256, depth 4, batch 64, AdamW, fp32",
        "times_s": times, "fastest": fastest,
        "picks": {name: scored(device) for name, device in picks.items()},
        # Devices within 5% of the fastest count as the fastest: timing noise on a shared machine.
        "hal_pick_is_fastest": picks["hal"] is not None and times.get(picks["hal"], float("inf")) <= 1.05 * times[fastest],
    }


def report(results: dict) -> None:
    machine = results["machine"]
    print(f"machine: {machine['cpu_model']}, {machine['logical_cpus']} logical CPUs, "
          f"{machine['memory_total_gb']:.1f} GB; torch {machine['torch']} with {machine['torch_num_threads']} thread(s); "
          f"load average {machine['load_average_1m']:.2f} before the run")
    print("\nHAL costs (median per call) beside baselines:")
    for row in results["hal_costs"]:
        seconds = row["seconds"]
        shown = f"{seconds * 1e3:9.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:9.2f} us"
        print(f"  {'HAL ' if row['kind'] == 'hal' else 'base'} {row['name']:<58} {shown}")
    print("\nper device: achieved vs theoretical peak")
    print(f"  {'device':<10} {'matmul':>7} {'TFLOPS':>9} {'peak':>8} {'eff.':>6} {'H2D GB/s':>9} {'D2H GB/s':>9} {'step ms':>8}")
    for row in results["devices"]:
        mm, copy = row["matmul"], row["copy"]
        if mm is None:
            print(f"  {row['device']:<10} not measured: {row.get('error')}")
            continue
        peak = f"{mm['peak_tflops']:.2f}" if mm["peak_tflops"] else "?"
        eff = f"{mm['efficiency']:.1%}" if mm["efficiency"] else "?"
        h2d = f"{copy['host_to_device_gbps']:.1f}" if copy else "-"
        d2h = f"{copy['device_to_host_gbps']:.1f}" if copy else "-"
        step = f"{row['train_step_s'] * 1e3:.2f}" if row["train_step_s"] else "-"
        print(f"  {row['device']:<10} {mm['n']:>7} {mm['achieved_tflops']:>9.4f} {peak:>8} {eff:>6} {h2d:>9} {d2h:>9} {step:>8}")
    quality = results["selection_quality"]
    print(f"\nselection quality ({quality['workload']}): fastest {quality['fastest']}")
    for name, pick in quality["picks"].items():
        if pick["seconds"] is None:
            print(f"  {name:<7} pick {pick['device']}: not measured")
        else:
            print(f"  {name:<7} pick {pick['device']}: {pick['seconds'] * 1e3:.2f} ms, "
                  f"{pick['slowdown_vs_fastest']:.2f}x the fastest")
    print(f"  the HAL's pick is the fastest device (within 5%): {quality['hal_pick_is_fastest']}")


def plot(results: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise SystemExit(f"--plot needs matplotlib ({error}); pip install matplotlib") from None
    fig, (costs, tflops, steps) = plt.subplots(1, 3, figsize=(17, 5.5))
    names = [r["name"] for r in results["hal_costs"]]
    values = [r["seconds"] * 1e6 for r in results["hal_costs"]]
    colors = ["tab:blue" if r["kind"] == "hal" else "tab:gray" for r in results["hal_costs"]]
    costs.barh(range(len(names)), values, color=colors)
    costs.set_yticks(range(len(names)), [n[:40] for n in names], fontsize=7)
    costs.set_xscale("log")
    costs.set_xlabel("microseconds per call (log); blue HAL, grey baseline")
    costs.invert_yaxis()
    costs.set_title("HAL costs vs baselines")
    measured = [r for r in results["devices"] if r["matmul"]]
    labels = [r["device"] for r in measured]
    x = range(len(measured))
    achieved = [r["matmul"]["achieved_tflops"] for r in measured]
    peaks = [r["matmul"]["peak_tflops"] or 0.0 for r in measured]
    tflops.bar([i - 0.2 for i in x], peaks, width=0.4, label="theoretical peak (HAL)", color="lightgray")
    tflops.bar([i + 0.2 for i in x], achieved, width=0.4, label="achieved", color="tab:green")
    for i, r in enumerate(measured):
        if r["matmul"]["efficiency"]:
            tflops.annotate(f"{r['matmul']['efficiency']:.0%}", (i + 0.2, achieved[i]), ha="center", va="bottom", fontsize=8)
    tflops.set_xticks(list(x), labels)
    tflops.set_ylabel("fp32 matmul TFLOPS")
    tflops.set_title("achieved vs peak")
    tflops.legend(fontsize=8)
    quality = results["selection_quality"]
    devices = list(quality["times_s"])
    hal_pick = quality["picks"]["hal"]["device"]
    steps.bar(devices, [quality["times_s"][d] * 1e3 for d in devices],
              color=["tab:orange" if d == hal_pick else "tab:gray" for d in devices])
    steps.set_ylabel("training step, ms (orange: HAL's pick)")
    steps.set_title(f"selection quality (fastest: {quality['fastest']})")
    machine = results["machine"]
    fig.suptitle(f"{machine['cpu_model']} ({machine['logical_cpus']} CPUs), torch {machine['torch']}, "
                 f"{results['created_utc']}{' --quick' if results['quick'] else ''}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, short timings (under a minute on 2 cores)")
    parser.add_argument("--output", help="write the results as JSON to this file")
    parser.add_argument("--plot", help="draw the results as a PNG to this file (needs matplotlib)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads for the run (default: torch's choice). On a busy machine "
                             "OpenMP threads wait for each other's cores; 1 thread measures the kernels, not that")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.plot:  # fail before measuring, not after
        try:
            import matplotlib  # noqa: F401
        except ImportError as error:
            parser.error(f"--plot needs matplotlib ({error}); pip install matplotlib")

    import kernel_pytorch  # noqa: F401  (registers my_asic)
    from kernel_pytorch.distributed_scale import HardwareAdapter
    from kernel_pytorch.hardware_abstraction.hal_core import HardwareVendor

    budget = 0.1 if args.quick else 0.5
    import_runs = 2 if args.quick else 5
    adapter = HardwareAdapter(enable_hal=True)
    devices = runnable(adapter)
    opencl = [s for s in adapter.devices if s.vendor is HardwareVendor.OPENCL]
    progress = Progress(import_runs + 8 + 3 * len(devices) + len(opencl))
    results = {
        "schema": SCHEMA,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": machine_description(),
    }
    results["hal_costs"] = hal_costs(progress, import_runs, budget)
    results["devices"] = device_measurements(progress, adapter, args.quick, budget)
    results["selection_quality"] = selection_quality(progress, adapter, results["devices"], budget)
    progress.close()
    report(results)
    if args.output:
        with open(args.output, "w") as out:
            json.dump(results, out, indent=2)
        print(f"\nwrote {args.output}")
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
