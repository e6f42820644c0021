"""What a running MemoryMonitor costs an allocation-heavy loop, measured side by side.

    python benchmarks/memory_monitor_overhead.py [--device my_asic:0] [--json out.json] [--quick]

One round is 1,000 allocate/free cycles (a tensor of --bytes allocated and
dropped). Rounds without and with a started monitor (sampling every
--interval-s seconds on its thread; on my_asic also watching the allocation
path) alternate so drift hits both sides; the figure is the ratio of the
medians, goal <= 1.05x. The second row empties the allocator's cache
after every cycle, so each allocation takes fresh device memory: the path on
which the my_asic monitor compares usage with its thresholds.
"""

import argparse
import json
import statistics
import sys
import time

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.hardware_abstraction import MemoryMonitor

CYCLES = 1000


def cycles(device: torch.device, nbytes: int, fresh: bool) -> float:
    """Seconds for CYCLES allocate/free cycles."""
    start = time.perf_counter()
    for _ in range(CYCLES):
        t = torch.empty(nbytes, dtype=torch.uint8, device=device)
        del t
        if fresh:
            empty_cache(device)
    return time.perf_counter() - start


def empty_cache(device: torch.device) -> None:
    module = getattr(torch, device.type, None)
    if module is not None and hasattr(module, "empty_cache"):
        module.empty_cache()


def measure(device, nbytes, fresh, rounds, interval_s):
    without, with_monitor = [], []
    cycles(device, nbytes, fresh)  # warm up
    for r in range(rounds):
        print(f"\r[{'fresh' if fresh else 'cached'}] round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
        without.append(cycles(device, nbytes, fresh))
        with MemoryMonitor(device, warning=0.90, critical=0.95, interval_s=interval_s):
            with_monitor.append(cycles(device, nbytes, fresh))
    print(file=sys.stderr)
    return statistics.median(without), statistics.median(with_monitor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="my_asic:0")
    parser.add_argument("--bytes", type=int, default=1 << 20, help="bytes per allocation (default 1 MiB)")
    parser.add_argument("--interval-s", type=float, default=0.1, help="monitor sampling period, seconds")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    device = torch.device(args.device)
    rounds = 5 if args.quick else args.rounds
    rows = []
    print(f"torch {torch.__version__}, device {device}, {CYCLES} cycles of {args.bytes} bytes per round, "
          f"monitor every {args.interval_s} s")
    print(f"{'measurement':<40} {'without (ms)':>13} {'with (ms)':>11} {'ratio':>7} {'goal':>8}")
    for fresh in (False, True):
        without, with_monitor = measure(device, args.bytes, fresh, rounds, args.interval_s)
        ratio = with_monitor / without
        name = "alloc/free, fresh device memory" if fresh else "alloc/free, cached blocks"
        ok = ratio <= 1.05
        print(f"{name:<40} {without * 1e3:>13.2f} {with_monitor * 1e3:>11.2f} {ratio:>6.3f}x {'<= 1.05x':>8} "
              f"{'PASS' if ok else 'MISS'}")
        rows.append({"measurement": name, "device": str(device), "cycles": CYCLES, "bytes": args.bytes,
                     "without_ms": without * 1e3, "with_ms": with_monitor * 1e3, "ratio": ratio,
                     "goal": "<= 1.05x", "met": ok})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
