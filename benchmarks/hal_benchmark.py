"""HAL latency benchmark: cold import + discovery, and a cached device selection.

Usage::

    python benchmarks/hal_benchmark.py [--runs 7] [--json]

1. ``import kernel_pytorch`` + discovery of every device, measured *after*
   ``import torch`` (torch's own import is not ours to speed up), each run in
   a fresh interpreter so no module or discovery cache carries over. The
   median of ``--runs`` runs is compared with the 300 ms goal.
2. ``HardwareAdapter.get_optimal_device_hal`` on an adapter whose discovery is
   already cached, timed with ``timeit``; the median per-call time of several
   repeats is compared with the 100 µs goal.

Each measurement prints its goal and a PASS/MISS line with the ratio
measured/goal. The fresh-interpreter runs also report which vendor runtimes
``import kernel_pytorch`` loaded beyond those ``import torch`` already had
(torch imports pynvml when it is installed) and whether it created a CUDA
context: both should be "none"/"no" (discovery itself may load the runtimes
it needs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import timeit

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

IMPORT_AND_DISCOVER_GOAL_S = 0.300
CACHED_SELECTION_GOAL_S = 100e-6

VENDOR_RUNTIME_MODULES = ("pynvml", "amdsmi", "pyopencl", "intel_extension_for_pytorch")

# Runs in a fresh interpreter; prints one JSON line.
_COLD_RUN = r"""
import json, sys, time
import torch
loaded_by_torch = set(sys.modules)  # torch itself may import pynvml; that is not ours
start = time.perf_counter()
import kernel_pytorch
import kernel_pytorch.hardware_abstraction
imported_after_import = [m for m in VENDOR_RUNTIME_MODULES if m in sys.modules and m not in loaded_by_torch]
cuda_context_after_import = torch.cuda.is_initialized()
from kernel_pytorch.hardware_abstraction import HardwareAbstractionLayer
devices = HardwareAbstractionLayer().discover()
elapsed = time.perf_counter() - start
print(json.dumps({
    "seconds": elapsed,
    "devices": [str(spec) for spec in devices],
    "vendor_runtimes_imported_by_import": imported_after_import,
    "cuda_context_after_import": cuda_context_after_import,
}))
"""


def measure_import_and_discover(runs: int) -> dict:
    """Median seconds of import + discovery over ``runs`` fresh interpreters."""
    code = f"VENDOR_RUNTIME_MODULES = {VENDOR_RUNTIME_MODULES!r}\n{_COLD_RUN}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    samples = []
    last = None
    for _ in range(runs):
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO_ROOT)
        if result.returncode != 0:
            raise RuntimeError(f"cold-import run failed:\n{result.stderr}")
        last = json.loads(result.stdout.strip().splitlines()[-1])
        samples.append(last["seconds"])
    return {
        "median_s": statistics.median(samples),
        "samples_s": samples,
        "devices": last["devices"],
        "vendor_runtimes_imported_by_import": last["vendor_runtimes_imported_by_import"],
        "cuda_context_after_import": last["cuda_context_after_import"],
    }


def measure_cached_selection(repeats: int = 7, number: int = 2000) -> dict:
    """Median seconds per cached ``get_optimal_device_hal`` call."""
    sys.path.insert(0, REPO_ROOT)
    from kernel_pytorch.distributed_scale import HardwareAdapter

    adapter = HardwareAdapter(enable_hal=True)

    def select():
        return adapter.get_optimal_device_hal(
            memory_requirement_gb=8, compute_requirement_tflops=20, preferred_vendors=["nvidia", "amd", "intel"]
        )

    select()  # first call runs discovery; the benchmark measures the cached path
    per_call = [t / number for t in timeit.repeat(select, repeat=repeats, number=number)]
    return {"median_s": statistics.median(per_call), "samples_s": per_call, "devices_considered": len(adapter.devices)}


def verdict_line(label: str, measured_s: float, goal_s: float, unit: str) -> str:
    scale = {"ms": 1e3, "µs": 1e6}[unit]
    ratio = measured_s / goal_s
    status = "PASS" if measured_s < goal_s else "MISS"
    return f"{status}  {label}: {measured_s * scale:.1f} {unit} vs goal < {goal_s * scale:.0f} {unit} (ratio {ratio:.2f})"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh-interpreter runs for the import+discovery median")
    parser.add_argument("--json", action="store_true", help="print the raw measurements as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    cold = measure_import_and_discover(args.runs)
    cached = measure_cached_selection()
    if args.json:
        print(json.dumps({"import_and_discover": cold, "cached_get_optimal_device_hal": cached}, indent=2))
        return 0

    print(f"import kernel_pytorch + discover every device (after import torch), {args.runs} fresh interpreters")
    print("  samples: " + ", ".join(f"{s * 1e3:.1f}" for s in cold["samples_s"]) + " ms")
    print(f"  devices: {len(cold['devices'])}")
    for device in cold["devices"]:
        print(f"    {device}")
    print(f"  vendor runtimes loaded by the import (beyond import torch's): {', '.join(cold['vendor_runtimes_imported_by_import']) or 'none'}")
    print(f"  CUDA context created by the import: {'yes' if cold['cuda_context_after_import'] else 'no'}")
    print(verdict_line("median import + discovery", cold["median_s"], IMPORT_AND_DISCOVER_GOAL_S, "ms"))
    print(f"cached HardwareAdapter.get_optimal_device_hal over {cached['devices_considered']} device(s), timeit")
    print(verdict_line("median per call", cached["median_s"], CACHED_SELECTION_GOAL_S, "µs"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
