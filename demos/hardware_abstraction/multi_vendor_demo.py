"""Multi-vendor device selection, end to end, on whatever this machine has.

    python demos/hardware_abstraction/multi_vendor_demo.py [--quick]

1. Discovery: every device the HAL finds across vendors, with memory and theoretical peak
   TFLOPS per precision, and why each missing vendor is missing.
2. Selection: for a few stated workloads, the legacy ``HardwareAdapter()`` placement beside
   the HAL's choice, with the reason every device was or wasn't chosen.
3. A short real training job on the device the HAL chose for the first workload, with
   its measured step time beside the HAL's peak.

Nothing is simulated by the demo itself: it runs on the CPU, on my_asic (kernel_pytorch's
device, backed here by its simulator runtime), and on any NVIDIA/AMD/Intel GPU torch sees.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic where no other accelerator is present)
from kernel_pytorch.cli import main as kernel_pytorch_cli
from kernel_pytorch.distributed_scale import HardwareAdapter
from kernel_pytorch.hardware_abstraction.measurement import small_mlp
from kernel_pytorch.hardware_abstraction.memory_estimation import estimate_inference_memory


@dataclass(frozen=True)
class Workload:
    """A job stated as the HAL takes it: free memory (GB), dense peak (TFLOPS) for a dtype."""

    title: str
    memory_gb: float
    tflops: float
    dtype: str
    preferred_vendors: Optional[Sequence[str]] = None


def workloads() -> list:
    llama_7b = estimate_inference_memory(hidden=4096, intermediate=11008, layers=32, vocab=32000,
                                         heads=32, max_seq_len=4096, bytes_per_param=2)
    return [
        Workload("train a small MLP (fp32)", 0.5, 0.01, "fp32"),
        Workload(f"serve Llama-2-7B in bf16 ({llama_7b.total_bytes / 1e9:.1f} GB, 4k context)",
                 llama_7b.total_bytes / 1e9, 100.0, "bf16"),
        Workload("fp8 inference at 500 TFLOPS (Hopper/Ada/MI300 class)", 8.0, 500.0, "fp8"),
        Workload("the same MLP, asking for my_asic first", 0.5, 0.01, "fp32", ("my_asic", "cpu")),
    ]


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def show_selection(hal_adapter: HardwareAdapter, legacy: HardwareAdapter, job: Workload):
    """Print legacy vs HAL for one workload; return the HAL's DeviceSpec (or None)."""
    print(f"\n-- {job.title}: {job.memory_gb:.2f} GB free, {job.tflops:g} {job.dtype} TFLOPS"
          + (f", preferred vendors {list(job.preferred_vendors)}" if job.preferred_vendors else ""))
    placement = legacy.get_optimal_device_placement(job.memory_gb, job.tflops)
    print(f"   legacy HardwareAdapter(): {', '.join(map(str, placement)) or 'no device'} "
          f"(memory only; it cannot check TFLOPS or dtype)")
    verdicts = hal_adapter.explain_device_selection(job.memory_gb, job.tflops, job.preferred_vendors, job.dtype)
    chosen = verdicts[0].device if verdicts and verdicts[0].accepted else None
    print(f"   HAL choice: {chosen.device if chosen else 'none fits'}"
          + (f" ({chosen.name})" if chosen else ""))
    for verdict in verdicts:
        note = ""
        if verdict.accepted and verdict.device.is_simulated and job.preferred_vendors is None:
            note = " (simulated on the host CPU: ranked after real devices)"
        print(f"     {verdict}{note}")
    return chosen


def train(device: torch.device, steps: int, width: int, peak_tflops: Optional[float]) -> None:
    torch.manual_seed(0)
    model = small_mlp(width, depth=4).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(512, width, generator=generator)
    # A learnable target: the class is which quarter of the first feature's range x falls in.
    targets = torch.bucketize(inputs[:, 0].contiguous(), torch.tensor([-0.67, 0.0, 0.67]))
    inputs, targets = inputs.to(device), targets.to(device)
    flop_per_step = 6 * sum(p.numel() for p in model.parameters()) * inputs.shape[0]  # fwd + bwd
    first = last = None
    step_seconds = []
    for step in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        value = loss.item()  # synchronises the device
        step_seconds.append(time.perf_counter() - start)
        first = value if first is None else first
        last = value
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"   step {step:3d}: loss {value:.4f}", flush=True)
    # The first steps pay one-time costs (kernel selection, allocator warm-up): median of the rest.
    steady = sorted(step_seconds[3:] or step_seconds)
    seconds = steady[len(steady) // 2]
    achieved = flop_per_step / seconds / 1e12
    peak = f" of a {peak_tflops:.2f} TFLOPS fp32 peak ({achieved / peak_tflops:.1%})" if peak_tflops else ""
    print(f"   {steps} steps on {device}: {seconds * 1e3:.1f} ms/step (median after 3), ~{achieved:.4f} TFLOPS{peak}; "
          f"loss {first:.4f} -> {last:.4f} ({'learning' if last < first else 'NOT learning'})")
    if not last < first:
        raise SystemExit(f"training on {device} did not reduce the loss")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer training steps (finishes in seconds)")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    section("1. Devices across vendors (python -m kernel_pytorch devices)")
    kernel_pytorch_cli(["devices"])

    section("2. Placement: legacy HardwareAdapter() beside the HAL")
    hal_adapter = HardwareAdapter(enable_hal=True)
    legacy = HardwareAdapter()
    choices = [show_selection(hal_adapter, legacy, job) for job in workloads()]

    section("3. Training on the HAL's choice for the first workload")
    chosen = choices[0]
    if chosen is None:
        print("   no device fits the first workload; nothing to train")
        return 1
    train(chosen.device, steps=20 if args.quick else 200, width=128 if args.quick else 512,
          peak_tflops=chosen.capabilities.peak_tflops_for("fp32"))
    print(f"\ndone in {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
