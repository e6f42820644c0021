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
3. Selection quality: the training step's time on every device the comparison needs (each
   device measured, including every device a pick names), and whether the device the HAL
   picks for it (default rules, no vendor preference) is the fastest; the legacy
   ``HardwareAdapter()`` pick and the naive pick are scored the same way.

Noisy machines (a shared 2-core CI box stalls a fresh process for hundreds of ms): every
comparison is timed like benchmarks/kernels.py does it, by
``kernel_pytorch.hardware_abstraction.measurement.time_interleaved``: a warm-up, then
interleaved rounds (each workload in turn, after a pause that lets the previous one's
OpenMP threads sleep), medians, and the spread of the round medians.  The selection verdict
is taken on each device's least-disturbed round (its fastest round's median, as
benchmarks/kernels.py's ``ratios_from_min``: on a busy machine medians also measure the
load, OpenMP threads waiting for each other's cores) against a noise band stated before
it: the larger round-to-round noise of the two devices compared (half the interquartile
range of their round medians), at least 5%; devices within it of the fastest count as tied.

A progress bar on stderr shows what is being measured.  ``--output`` writes the results
as JSON (schema below and in docs/benchmarks.md), ``--plot`` draws them as a PNG
(needs matplotlib): medians with the round-to-round spread as error bars.

JSON schema (``"schema": "kernel_pytorch.hal_benchmark/2"``).  A timing is
``{median_s, spread_s: [fastest round's median, slowest round's], noise, rounds, samples}``;
``figures`` says for every field whether it was measured, derived from measured figures,
or taken from the HAL's tables (not measured)::

    schema              str    "kernel_pytorch.hal_benchmark/2"
    created_utc         str    ISO 8601 time of the run
    quick               bool   --quick sizes
    machine             object platform, python, torch, kernel_pytorch versions; cpu_model,
                               logical_cpus, torch_num_threads, memory_total_gb (GB = 1e9 bytes),
                               load_average_1m (before the run; >= logical_cpus means the
                               figures were taken on a busy machine), devices (the HAL's
                               get_cross_vendor_capabilities()["cross_vendor_devices"]),
                               unavailable_vendors
    hal_costs           list   {name, kind: "hal"|"baseline", seconds (median per call),
                               spread_s, samples}
    devices             list   {device, name, simulated, matmul: {n, dtype, seconds, spread_s,
                               achieved_tflops, achieved_tflops_spread, peak_tflops, efficiency}
                               | null, copy: {nbytes, host_to_device_gbps, device_to_host_gbps,
                               host_to_device_gbps_spread, device_to_host_gbps_spread, pinned}
                               | null, train_step_s | null}
    selection_quality   object {workload, times_s: {device: median s}, timings: {device: timing},
                               fastest, noise_band, tied_with_fastest: [device],
                               picks: {hal, legacy, naive: {device, seconds, slowdown_vs_fastest}},
                               hal_pick_is_fastest, verdict}
    figures             object field path -> "measured: ..." | "derived: ..." | "not measured: ..."
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
SCHEMA = "kernel_pytorch.hal_benchmark/2"
# A verdict needs a margin larger than this, however quiet the rounds were.
MIN_NOISE_BAND = 0.05

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


def timing_row(timing) -> Dict[str, object]:
    """An InterleavedTiming as a row's ``seconds`` (median), ``spread_s`` and ``samples``."""
    return {"seconds": timing.median_s, "spread_s": [timing.low_s, timing.high_s], "samples": timing.samples}


def repeated_row(samples: List[float]) -> Dict[str, object]:
    """Separate runs of one measurement (fresh interpreters, new HALs): median and min-max."""
    return {"seconds": statistics.median(samples), "spread_s": [min(samples), max(samples)], "samples": len(samples)}


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


def hal_costs(progress: Progress, import_runs: int, rounds: int, budget_s: float) -> List[dict]:
    from kernel_pytorch.distributed_scale import HardwareAdapter
    from kernel_pytorch.hardware_abstraction import HardwareAbstractionLayer
    from kernel_pytorch.hardware_abstraction.measurement import time_interleaved

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
    rows.append({"name": "import torch", "kind": "baseline",
                 **repeated_row([s["import_torch_s"] for s in samples])})
    rows.append({"name": "import kernel_pytorch.hardware_abstraction (after torch)", "kind": "hal",
                 **repeated_row([s["import_hal_s"] for s in samples])})

    progress.step("cold discovery: HardwareAbstractionLayer().discover()")
    cold = []
    for _ in range(max(3, import_runs)):
        start = time.perf_counter()
        HardwareAbstractionLayer().discover()
        cold.append(time.perf_counter() - start)
    rows.append({"name": "cold discovery (new HAL, every adapter probes)", "kind": "hal", **repeated_row(cold)})

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
    progress.step(f"{len(measured)} HAL calls and baselines, {rounds} interleaved rounds")
    cpu = torch.device("cpu")
    timings = time_interleaved({name: (fn, cpu) for name, _, fn in measured}, rounds=rounds, budget_s=budget_s,
                               warmup_s=0.02, settle_s=0.0)
    for name, kind, _ in measured:
        rows.append({"name": name, "kind": kind, **timing_row(timings[name])})
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


def device_measurements(progress: Progress, adapter, quick: bool, rounds: int, budget_s: float) -> List[dict]:
    from kernel_pytorch.hardware_abstraction.hal_core import HardwareVendor
    from kernel_pytorch.hardware_abstraction.measurement import copy_workloads, opencl_matmul, time_interleaved

    rows, matmuls, copies = [], {}, {}
    for spec in runnable(adapter):
        device = spec.device
        host_like = device.type in ("cpu", "my_asic")
        n = (512 if quick else 2048) if host_like else (4096 if quick else 8192)
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=generator).to(device)
        b = torch.randn(n, n, generator=generator).to(device)
        matmuls[spec.label] = (spec, n, (lambda a=a, b=b: torch.mm(a, b)), device)
        nbytes = (16 if quick else 256) * 2**20
        to_device, to_host, pinned = copy_workloads(device, nbytes)
        copies[spec.label] = (nbytes, to_device, to_host, pinned, device)
        rows.append({"device": spec.label, "name": spec.name, "simulated": spec.is_simulated,
                     "matmul": None, "copy": None, "train_step_s": None})
    for spec in [s for s in adapter.devices if s.vendor is HardwareVendor.OPENCL]:
        n = 256 if quick else 1024
        row = {"device": spec.label, "name": spec.name, "simulated": False, "matmul": None, "copy": None,
               "train_step_s": None}
        rows.append(row)
        try:
            matmuls[spec.label] = (spec, n, opencl_matmul(spec, n), torch.device("cpu"))
        except Exception as error:  # a broken OpenCL driver must not end the benchmark
            row["error"] = str(error)
    progress.step(f"fp32 matmul on {len(matmuls)} device(s), {rounds} interleaved rounds")
    timed = time_interleaved({label: (fn, device) for label, (_, _, fn, device) in matmuls.items()},
                             rounds=rounds, budget_s=budget_s)
    by_label = {row["device"]: row for row in rows}
    for label, (spec, n, _, _) in matmuls.items():
        timing, flop = timed[label], 2 * n**3
        achieved = flop / timing.median_s / 1e12
        peak = spec.capabilities.peak_tflops_for("fp32")
        by_label[label]["matmul"] = {
            "n": n, "dtype": "fp32", "seconds": timing.median_s, "spread_s": [timing.low_s, timing.high_s],
            "achieved_tflops": achieved, "achieved_tflops_spread": [flop / timing.high_s / 1e12, flop / timing.low_s / 1e12],
            "peak_tflops": peak, "efficiency": achieved / peak if peak else None,
        }
    if copies:
        progress.step(f"host <-> device copies on {len(copies)} device(s), {rounds} interleaved rounds")
        workloads = {}
        for label, (_, to_device, to_host, _, device) in copies.items():
            workloads[f"{label} h2d"] = (to_device, device)
            workloads[f"{label} d2h"] = (to_host, device)
        timed = time_interleaved(workloads, rounds=rounds, budget_s=budget_s)
        for label, (nbytes, _, _, pinned, _) in copies.items():
            h2d, d2h = timed[f"{label} h2d"], timed[f"{label} d2h"]
            by_label[label]["copy"] = {
                "nbytes": nbytes, "pinned": pinned,
                "host_to_device_gbps": nbytes / h2d.median_s / 1e9,
                "device_to_host_gbps": nbytes / d2h.median_s / 1e9,
                "host_to_device_gbps_spread": [nbytes / h2d.high_s / 1e9, nbytes / h2d.low_s / 1e9],
                "device_to_host_gbps_spread": [nbytes / d2h.high_s / 1e9, nbytes / d2h.low_s / 1e9],
            }
    return rows


def selection_quality(progress: Progress, adapter, rows: List[dict], rounds: int, budget_s: float) -> dict:
    from kernel_pytorch.distributed_scale import HardwareAdapter
    from kernel_pytorch.hardware_abstraction.measurement import time_interleaved, training_step

    hal = adapter.get_optimal_device_hal(memory_requirement_gb=0.1, compute_requirement_tflops=0.0, dtype="fp32")
    legacy = HardwareAdapter().get_optimal_device_placement(memory_gb=0.1)
    picks = {"hal": str(hal.device) if hal else None, "legacy": str(legacy[0]) if legacy else None,
             "naive": str(naive_pick())}
    # Every device a pick names is measured, beside one of each kind of device: a figure
    # copied from an "identical" device would not be a measurement.
    devices = [str(spec.device) for spec in runnable(adapter)]
    devices += [d for d in picks.values() if d is not None and d not in devices]
    progress.step(f"training step (MLP 256x4, batch 64, AdamW) on {', '.join(devices)}, {rounds} interleaved rounds")
    timed = time_interleaved({d: (training_step(torch.device(d)), torch.device(d)) for d in devices},
                             rounds=rounds, budget_s=budget_s, warmup_s=max(0.2, budget_s / 4))
    times = {d: t.median_s for d, t in timed.items()}
    best = {d: t.low_s for d, t in timed.items()}
    for row in rows:
        if row["device"] in times:
            row["train_step_s"] = times[row["device"]]
    # The verdict compares each device's least-disturbed round (its fastest round's median),
    # as benchmarks/kernels.py's ratios_from_min do: on a busy machine the medians also
    # measure the load (OpenMP threads waiting for cores), which changes from run to run.
    fastest = min(best, key=best.get)

    def band_for(device: str) -> float:
        return max(MIN_NOISE_BAND, timed[device].noise, timed[fastest].noise)

    tied = [d for d in devices if d != fastest and best[d] <= best[fastest] * (1 + band_for(d))]

    def scored(device: Optional[str]) -> dict:
        if device not in timed:
            return {"device": device, "seconds": None, "best_round_s": None, "slowdown_vs_fastest": None}
        return {"device": device, "seconds": times[device], "best_round_s": best[device],
                "slowdown_vs_fastest": best[device] / best[fastest]}

    hal_pick = picks["hal"]
    band = band_for(hal_pick) if hal_pick in timed else max(MIN_NOISE_BAND, timed[fastest].noise)
    is_fastest = hal_pick in timed and best[hal_pick] <= best[fastest] * (1 + band)
    if hal_pick is None:
        verdict = "no: the HAL picked no device"
    elif hal_pick == fastest:
        verdict = f"yes: {hal_pick} has the fastest least-disturbed round"
    elif is_fastest:
        verdict = (f"yes, within the noise band: {hal_pick} {best[hal_pick] * 1e3:.2f} ms vs the fastest "
                   f"{fastest} {best[fastest] * 1e3:.2f} ms ({best[hal_pick] / best[fastest] - 1:+.1%})")
    else:
        verdict = (f"no: {hal_pick} {best[hal_pick] * 1e3:.2f} ms is {best[hal_pick] / best[fastest] - 1:+.1%} "
                   f"slower than {fastest} {best[fastest] * 1e3:.2f} ms, beyond the noise band")
    return {
        "workload": "one training step: MLP width 256, depth 4, batch 64, AdamW, fp32",
        "times_s": times, "best_round_s": best, "timings": {d: t.as_dict() for d, t in timed.items()},
        "fastest": fastest, "fastest_median": min(times, key=times.get), "noise_band": band,
        "tied_with_fastest": tied, "picks": {name: scored(device) for name, device in picks.items()},
        "hal_pick_is_fastest": is_fastest, "verdict": verdict,
    }


# What each figure is: measured here, derived from measured figures, or not measured.
FIGURES = {
    "machine": "not measured: as the OS and the HAL report them (load_average_1m by the OS before the run)",
    "hal_costs[].seconds": "measured: median per call (fresh interpreters and cold discovery: median of separate runs; "
                           "the rest: interleaved rounds)",
    "hal_costs[].spread_s": "measured: fastest and slowest run, or fastest and slowest round median",
    "devices[].matmul.seconds": "measured: median of n x n fp32 matmuls, devices interleaved",
    "devices[].matmul.spread_s": "measured: fastest and slowest round median",
    "devices[].matmul.achieved_tflops": "derived: 2 n^3 FLOP / seconds (its _spread from spread_s)",
    "devices[].matmul.peak_tflops": "not measured: the HAL's theoretical peak (units x clock x FLOP per clock)",
    "devices[].matmul.efficiency": "derived: achieved_tflops / peak_tflops",
    "devices[].copy.*_gbps": "derived: nbytes / the measured median copy time (its _spread from the round medians)",
    "devices[].train_step_s": "measured: the median training step (= selection_quality.times_s)",
    "selection_quality.times_s": "measured: median training step per device, devices interleaved",
    "selection_quality.timings": "measured: median, round-to-round spread, rounds and samples per device",
    "selection_quality.best_round_s": "measured: each device's least-disturbed round (its fastest round's median)",
    "selection_quality.fastest": "derived: the device with the smallest best_round_s (fastest_median: smallest median)",
    "selection_quality.noise_band": "derived: the larger round-to-round noise (timings.noise: half the interquartile "
                                    "range of the round medians / the median) of the HAL's pick and the fastest, "
                                    f"at least {MIN_NOISE_BAND:.0%}",
    "selection_quality.picks.*.seconds": "measured: the picked device's own median (every picked device is timed)",
    "selection_quality.picks.*.best_round_s": "measured: the picked device's own least-disturbed round",
    "selection_quality.picks.*.slowdown_vs_fastest": "derived: best_round_s / the fastest device's best_round_s",
    "selection_quality.hal_pick_is_fastest": "derived: the HAL pick's best_round_s <= the fastest's x (1 + noise_band)",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.2f} us"


def report(results: dict) -> None:
    machine = results["machine"]
    print(f"machine: {machine['cpu_model']}, {machine['logical_cpus']} logical CPUs, "
          f"{machine['memory_total_gb']:.1f} GB; torch {machine['torch']} with {machine['torch_num_threads']} thread(s); "
          f"load average {machine['load_average_1m']:.2f} before the run")
    print("\nHAL costs (median per call, [fastest - slowest] run or round) beside baselines:")
    for row in results["hal_costs"]:
        low, high = row["spread_s"]
        print(f"  {'HAL ' if row['kind'] == 'hal' else 'base'} {row['name']:<58} {_ms(row['seconds']):>10}  "
              f"[{_ms(low)} - {_ms(high)}]")
    print("\nper device: achieved (median) vs theoretical peak (the HAL's table, not measured)")
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
    print(f"\nselection quality ({quality['workload']}), median [fastest - slowest round]:")
    for device, timing in quality["timings"].items():
        low, high = timing["spread_s"]
        print(f"  {device:<10} {_ms(timing['median_s']):>10}  [{_ms(low)} - {_ms(high)}], "
              f"{timing['rounds']} rounds, {timing['samples']} steps")
    tied = f" ({', '.join(quality['tied_with_fastest'])} within the noise band)" if quality["tied_with_fastest"] else ""
    print(f"  fastest (least-disturbed round): {quality['fastest']}{tied}; fastest median: {quality['fastest_median']}")
    for name, pick in quality["picks"].items():
        if pick["seconds"] is None:
            print(f"  {name:<7} pick {pick['device']}: not measured")
        else:
            print(f"  {name:<7} pick {pick['device']}: median {_ms(pick['seconds'])}, least-disturbed round "
                  f"{_ms(pick['best_round_s'])}, {pick['slowdown_vs_fastest']:.2f}x the fastest")
    print(f"  noise band: +-{quality['noise_band']:.1%} (the larger round-to-round noise of the HAL's pick and the "
          f"fastest: half the interquartile range of their round medians; at least {MIN_NOISE_BAND:.0%})")
    if quality["noise_band"] > 0.25:
        print(f"  (a wide band: the machine was busy, load average {machine['load_average_1m']:.1f} on "
              f"{machine['logical_cpus']} CPUs before the run; the verdict only tells a pick slower than that apart)")
    print(f"  the HAL's pick is the fastest device (within the noise band): {quality['hal_pick_is_fastest']} "
          f"-- {quality['verdict']}")


def _errors(medians: List[float], spreads: List[List[float]]) -> List[List[float]]:
    """matplotlib's asymmetric error bars (below, above) from [low, high] spreads."""
    return [[m - lo for m, (lo, _) in zip(medians, spreads)], [hi - m for m, (_, hi) in zip(medians, spreads)]]


def plot(results: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise SystemExit(f"--plot needs matplotlib ({error}); pip install matplotlib") from None
    fig = plt.figure(figsize=(14, 10), layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[1.1, 1])
    costs = fig.add_subplot(grid[0, :])
    tflops, steps = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    rows = results["hal_costs"]
    values = [r["seconds"] * 1e6 for r in rows]
    spreads = [[v * 1e6 for v in r["spread_s"]] for r in rows]
    colors = ["tab:blue" if r["kind"] == "hal" else "tab:gray" for r in rows]
    costs.barh(range(len(rows)), values, xerr=_errors(values, spreads), color=colors, capsize=3)
    costs.set_yticks(range(len(rows)), [r["name"] for r in rows], fontsize=8)  # full names: the layout makes room
    costs.set_xscale("log")
    costs.set_xlabel("microseconds per call (log): median, error bar = fastest..slowest run or round; "
                     "blue HAL, grey baseline")
    costs.invert_yaxis()
    costs.set_title("HAL costs vs baselines (measured)")

    measured = [r for r in results["devices"] if r["matmul"]]
    x = list(range(len(measured)))
    achieved = [r["matmul"]["achieved_tflops"] for r in measured]
    peaks = [r["matmul"]["peak_tflops"] or 0.0 for r in measured]
    tflops.bar([i - 0.2 for i in x], peaks, width=0.4, color="lightgray",
               label="theoretical peak (HAL table, not measured)")
    tflops.bar([i + 0.2 for i in x], achieved, width=0.4, color="tab:green", capsize=3,
               yerr=_errors(achieved, [r["matmul"]["achieved_tflops_spread"] for r in measured]),
               label="achieved (measured median, fastest..slowest round)")
    for i, r in enumerate(measured):
        if r["matmul"]["efficiency"]:
            tflops.annotate(f"{r['matmul']['efficiency']:.0%}", (i + 0.2, r["matmul"]["achieved_tflops_spread"][1]),
                            xytext=(0, 3),
                            textcoords="offset points", ha="center", va="bottom", fontsize=8)
    tflops.set_xticks(x, [r["device"] for r in measured])
    tflops.set_ylabel("fp32 matmul TFLOPS (% = derived efficiency)")
    tflops.set_title("achieved vs peak")
    tops = peaks + [r["matmul"]["achieved_tflops_spread"][1] for r in measured]
    tflops.set_ylim(0, 1.35 * max(tops + [1e-6]))  # room for the legend above the bars
    tflops.legend(fontsize=8, loc="upper right")

    quality = results["selection_quality"]
    devices = list(quality["timings"])
    medians = [quality["timings"][d]["median_s"] * 1e3 for d in devices]
    step_spreads = [[v * 1e3 for v in quality["timings"][d]["spread_s"]] for d in devices]
    hal_pick = quality["picks"]["hal"]["device"]
    steps.bar(devices, medians, yerr=_errors(medians, step_spreads), capsize=3,
              color=["tab:orange" if d == hal_pick else "tab:gray" for d in devices])
    fastest = quality["best_round_s"][quality["fastest"]] * 1e3
    steps.axhspan(fastest, fastest * (1 + quality["noise_band"]), color="tab:green", alpha=0.2,
                  label=f"verdict: noise band above the fastest least-disturbed round (+{quality['noise_band']:.0%})")
    top = max([hi for _, hi in step_spreads] + [fastest * (1 + quality["noise_band"])])
    if top > 10 * min(lo for lo, _ in step_spreads):  # a busy machine: rounds 10x apart need a log axis
        steps.set_yscale("log")
        steps.set_ylim(min(lo for lo, _ in step_spreads) / 2, top * 4)
    else:
        steps.set_ylim(0, 1.35 * top)
    steps.set_ylabel("training step, ms: median, fastest..slowest round")
    steps.scatter(devices, [quality["best_round_s"][d] * 1e3 for d in devices], marker="_", s=400, color="black",
                  zorder=3, label="least-disturbed round (the verdict's figure)")
    steps.set_title(f"selection quality: HAL's pick (orange) fastest: {quality['hal_pick_is_fastest']}")
    steps.legend(fontsize=8, loc="upper left")
    machine = results["machine"]
    fig.suptitle(f"{machine['cpu_model']} ({machine['logical_cpus']} CPUs, load {machine['load_average_1m']:.1f}), "
                 f"torch {machine['torch']}, {results['created_utc']}{' --quick' if results['quick'] else ''}",
                 fontsize=9)
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
    parser.add_argument("--rounds", type=int, default=None,
                        help="interleaved rounds per comparison (default 8, --quick 6; the selection verdict's "
                             "training-step comparison gets twice as many)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    if args.rounds is not None and args.rounds < 2:
        parser.error(f"--rounds must be >= 2 (a spread needs two rounds), got {args.rounds}")
    if args.plot:  # fail before measuring, not after
        try:
            import matplotlib  # noqa: F401
        except ImportError as error:
            parser.error(f"--plot needs matplotlib ({error}); pip install matplotlib")

    import kernel_pytorch  # noqa: F401  (registers my_asic)
    from kernel_pytorch.distributed_scale import HardwareAdapter

    rounds = args.rounds or (6 if args.quick else 8)
    budget = 0.5 if args.quick else 2.0  # seconds per workload per comparison, all rounds together
    import_runs = 3 if args.quick else 5
    adapter = HardwareAdapter(enable_hal=True)
    progress = Progress(import_runs + 5)
    results = {
        "schema": SCHEMA,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "machine": machine_description(),
    }
    results["hal_costs"] = hal_costs(progress, import_runs, rounds, budget / 4)
    results["devices"] = device_measurements(progress, adapter, args.quick, rounds, budget)
    # The verdict's comparison gets twice the rounds and time: more chances of a quiet round.
    results["selection_quality"] = selection_quality(progress, adapter, results["devices"], 2 * rounds, 2 * budget)
    results["figures"] = FIGURES
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
