"""What a running MemoryMonitor costs an allocation-heavy loop, measured side by side.

    python benchmarks/memory_monitor_overhead.py [--device my_asic:0] [--json out.json] [--quick]

One round is 1,000 allocate/free cycles (a tensor of --bytes allocated and
dropped). Rounds without and with a started monitor (sampling every
--interval-s seconds on its thread; on my_asic also watching the allocation
path) alternate so drift hits both sides; the figure is the median of the
per-round ratios, goal <= 1.05x, beside an A/A control (a second round
without the monitor) that shows the machine's noise band. The second row empties the allocator's cache
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
    """Per round: one timing without the monitor, one with it and a second one
    without (the A/A control), in an order that rotates so neither side always
    runs first. Returns the medians and the medians of the per-round ratios:
    on a loaded machine round times are bimodal, and a ratio of two medians may
    compare one mode with the other, while rounds next to each other in time
    see the same load."""
    without, with_monitor, ratios, control = [], [], [], []
    cycles(device, nbytes, fresh)  # warm up
    for r in range(rounds):
        print(f"\r[{'fresh' if fresh else 'cached'}] round {r + 1}/{rounds}", end="", file=sys.stderr, flush=True)
        times = {}
        for side in ("without", "with", "control")[r % 3:] + ("without", "with", "control")[: r % 3]:
            if side == "with":
                with MemoryMonitor(device, warning=0.90, critical=0.95, interval_s=interval_s):
                    times[side] = cycles(device, nbytes, fresh)
            else:
                times[side] = cycles(device, nbytes, fresh)
        without.append(times["without"])
        with_monitor.append(times["with"])
        ratios.append(times["with"] / times["without"])
        control.append(times["control"] / times["without"])
    print(file=sys.stderr)
    return (statistics.median(without), statistics.median(with_monitor), statistics.median(ratios),
            statistics.median(control))


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
    print("ratio: median over rounds of (with / without) in the same round; control: the same for a")
    print("second run without the monitor, i.e. the noise band of this machine now")
    print(f"{'measurement':<36} {'without (ms)':>13} {'with (ms)':>11} {'ratio':>7} {'control':>8} {'goal':>8}")
    for fresh in (False, True):
        without, with_monitor, ratio, control = measure(device, args.bytes, fresh, rounds, args.interval_s)
        name = "alloc/free, fresh device memory" if fresh else "alloc/free, cached blocks"
        ok = ratio <= 1.05
        print(f"{name:<36} {without * 1e3:>13.2f} {with_monitor * 1e3:>11.2f} {ratio:>6.3f}x {control:>7.3f}x "
              f"{'<= 1.05x':>8} {'PASS' if ok else 'MISS'}")
        rows.append({"measurement": name, "device": str(device), "cycles": CYCLES, "bytes": args.bytes,
                     "rounds": rounds, "without_ms": without * 1e3, "with_ms": with_monitor * 1e3,
                     "ratio": ratio, "ratio_of_medians": with_monitor / without, "control_ratio": control,
                     "goal": "<= 1.05x", "met": ok})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
