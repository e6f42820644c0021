"""myccl against gloo: all_reduce and all_gather bandwidth, side by side in one run.

Each world size (default 2 and 4 processes) is one job with the group
``"cpu:gloo,my_asic:myccl"``: CPU tensors go through gloo, my_asic tensors
through myccl (whose transport is gloo over host aliases of device memory,
or staging copies with --no-host-addressable). The two backends alternate
(ABBA) on same-sized tensors, size by size, each timed call starting after a
barrier, so machine noise hits both alike.

Bandwidth follows nccl-tests: ``algbw = size / time`` and
``busbw = algbw * 2(n-1)/n`` for all_reduce, ``algbw * (n-1)/n`` for
all_gather, where ``size`` is the all_reduce buffer or the all_gather
output. Units: GB/s (1e9 bytes per second); sizes in MiB (2**20 bytes).
Times are medians over ``--iters`` calls (``best_*``: the fastest call,
which is less disturbed by other load on the machine), maxed over ranks.
``ratio`` is myccl busbw / gloo busbw (goal: >= 0.9 for all_reduce at 64 MiB).

    python benchmarks/distributed.py                   # 2 and 4 ranks, 1/16/64 MiB
    python benchmarks/distributed.py --worlds 2 --sizes-mib 64 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

OPS = ("all_reduce", "all_gather")
BACKENDS = ("gloo", "myccl")


def _bus_factor(op: str, world: int) -> float:
    return 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world


def _rank_main(args) -> None:
    """One rank: times every (size, op, backend) and, on rank 0, writes results and progress."""
    import torch
    import torch.distributed as dist

    import kernel_pytorch  # noqa: F401

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("cpu:gloo,my_asic:myccl", init_method=os.environ["KP_BENCH_INIT"], rank=rank,
                            world_size=world, timeout=timedelta(seconds=300))
    # Barriers run on a gloo group of their own: a barrier on the measured gloo
    # backend would leave its connections hot and favour it over myccl's.
    barrier_group = dist.new_group(backend="gloo")
    dev = torch.device("my_asic", rank % torch.my_asic.device_count())
    torch.my_asic.set_device(dev)
    steps = [(s, op) for s in args.sizes_mib for op in OPS]
    results = []
    for index, (size_mib, op) in enumerate(steps):
        numel = size_mib * 2**20 // 4  # float32
        buffers = {}
        for backend, device in (("gloo", torch.device("cpu")), ("myccl", dev)):
            if op == "all_reduce":
                buffers[backend] = (torch.ones(numel, device=device),)
            else:
                buffers[backend] = (torch.empty(numel, device=device), torch.ones(numel // world, device=device))

        def run_once(backend):
            bufs = buffers[backend]
            if op == "all_reduce":
                dist.all_reduce(bufs[0])
            else:
                dist.all_gather_into_tensor(bufs[0], bufs[1])

        times = {b: [] for b in BACKENDS}
        for backend in BACKENDS:
            for _ in range(args.warmup):
                run_once(backend)
        token = torch.zeros(1)
        for i in range(args.iters):
            # Alternate the order (ABBA) so neither backend always goes first.
            for backend in (BACKENDS if i % 2 == 0 else BACKENDS[::-1]):
                dist.all_reduce(token, group=barrier_group)  # every rank starts the timed call together
                start = time.perf_counter()
                run_once(backend)
                if backend == "myccl":
                    torch.my_asic.synchronize(dev)
                times[backend].append(time.perf_counter() - start)
        # Each rank's median and best; the slowest rank bounds the collective.
        stats = torch.tensor([[statistics.median(times[b]), min(times[b])] for b in BACKENDS], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        if rank == 0:
            row = {"world_size": world, "op": op, "size_mib": size_mib, "iters": args.iters}
            for backend, (median_s, best_s) in zip(BACKENDS, stats.tolist()):
                algbw = size_mib * 2**20 / median_s / 1e9
                row[backend] = {"time_ms": median_s * 1e3, "algbw_gbps": algbw,
                                "busbw_gbps": algbw * _bus_factor(op, world),
                                "best_time_ms": best_s * 1e3,
                                "best_busbw_gbps": size_mib * 2**20 / best_s / 1e9 * _bus_factor(op, world)}
            row["ratio_myccl_over_gloo"] = row["myccl"]["busbw_gbps"] / row["gloo"]["busbw_gbps"]
            row["best_ratio_myccl_over_gloo"] = row["myccl"]["best_busbw_gbps"] / row["gloo"]["best_busbw_gbps"]
            results.append(row)
            Path(os.environ["KP_BENCH_PROGRESS"]).write_text(f"{index + 1}/{len(steps)}")
    if rank == 0:
        Path(os.environ["KP_BENCH_OUT"]).write_text(json.dumps(results))
    dist.destroy_process_group()


def _progress(label: str, done: int, total: int, width: int = 30) -> None:
    filled = int(width * done / max(total, 1))
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    sys.stderr.flush()


def run_world(world: int, args) -> list:
    """Runs one job of ``world`` ranks; returns rank 0's rows."""
    workdir = tempfile.mkdtemp(prefix="kp_bench_dist_")
    env = dict(os.environ)
    env.update({
        "WORLD_SIZE": str(world),
        "KP_BENCH_INIT": "file://" + os.path.join(workdir, "rendezvous"),
        "KP_BENCH_OUT": os.path.join(workdir, "results.json"),
        "KP_BENCH_PROGRESS": os.path.join(workdir, "progress"),
        "MY_ASIC_DEVICE_COUNT": str(world),
        "MY_ASIC_HOST_ADDRESSABLE": "1" if args.host_addressable else "0",
    })
    command = [sys.executable, os.path.abspath(__file__), "--rank-main",
               "--sizes-mib", *map(str, args.sizes_mib), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    procs = []
    for rank in range(world):
        procs.append(subprocess.Popen(command, env={**env, "RANK": str(rank)}, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(workdir, f"rank{rank}.log"), "w")))
    total = len(args.sizes_mib) * len(OPS)
    label = f"{world} ranks"
    while any(p.poll() is None for p in procs):
        progress = Path(env["KP_BENCH_PROGRESS"])
        done = int(progress.read_text().split("/")[0]) if progress.exists() else 0
        _progress(label, done, total)
        if any(p.poll() not in (None, 0) for p in procs):
            break
        time.sleep(0.5)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    _progress(label, total, total)
    sys.stderr.write("\n")
    if any(p.returncode != 0 for p in procs):
        logs = "\n".join(Path(workdir, f"rank{r}.log").read_text()[-2000:] for r in range(world))
        raise RuntimeError(f"the {world}-rank job failed:\n{logs}")
    return json.loads(Path(env["KP_BENCH_OUT"]).read_text())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, nargs="+", default=[2, 4], help="process counts (default 2 4)")
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[1, 16, 64], help="message sizes in MiB")
    parser.add_argument("--iters", type=int, default=10, help="timed iterations per backend and size")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--no-host-addressable", dest="host_addressable", action="store_false",
                        help="simulate device memory the host cannot address (myccl stages copies)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank_main:
        _rank_main(args)
        return 0
    rows = []
    for world in args.worlds:
        rows.extend(run_world(world, args))
    report = {
        "benchmark": "myccl vs gloo bandwidth",
        "units": {"size": "MiB", "bandwidth": "GB/s", "time": "ms"},
        "host_addressable": args.host_addressable,
        "cpu_count": os.cpu_count(),
        "results": rows,
    }
    for row in rows:
        print(f"{row['world_size']} ranks {row['op']:>10} {row['size_mib']:>4} MiB: "
              f"gloo {row['gloo']['busbw_gbps']:.2f} GB/s, myccl {row['myccl']['busbw_gbps']:.2f} GB/s, "
              f"ratio {row['ratio_myccl_over_gloo']:.2f} (best-call ratio {row['best_ratio_myccl_over_gloo']:.2f})",
              file=sys.stderr)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
