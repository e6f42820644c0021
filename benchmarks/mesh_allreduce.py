"""All-reduce bus bandwidth over the HAL's device mesh (NCCL on GPUs, myccl on my_asic).

The HAL describes this machine's devices of one type
(``HardwareAdapter.device_mesh_description``); this script starts one process
per device, and each joins the group with
``init_process_group_from_mesh`` (nccl for CUDA, myccl for my_asic, gloo for
the CPU). Every rank then trains a small model with DDP for a few steps and
checks that all ranks end with identical weights, and times ``all_reduce``
on float32 messages from 1 MiB to 1 GiB.

``busbw = size / time * 2(n-1)/n`` as in nccl-tests; GB/s = 1e9 bytes/s,
sizes in MiB (2**20 bytes). The JSON report goes to stdout (and --json);
progress to stderr.

    python benchmarks/mesh_allreduce.py                         # all CUDA GPUs (nccl)
    python benchmarks/mesh_allreduce.py --device-type my_asic --max-mib 64
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path


def _sizes_mib(min_mib: int, max_mib: int):
    size = min_mib
    while size <= max_mib:
        yield size
        size *= 2


def _meshes(device_type: str):
    from kernel_pytorch.distributed_scale.hardware_adapter import HardwareAdapter

    meshes = [m for m in HardwareAdapter(enable_hal=True).device_mesh_description() if m.device_type == device_type]
    if not meshes:
        raise SystemExit(f"the HAL found no {device_type} devices on this machine")
    return meshes


def _rank_main(args) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import kernel_pytorch  # noqa: F401  (my_asic and myccl, where registered)
    from kernel_pytorch.hardware_abstraction.process_groups import init_process_group_from_mesh

    group = init_process_group_from_mesh(_meshes(args.device_type), timeout=timedelta(seconds=600))
    rank, world, device = group.rank, group.world_size, group.device
    sync = (lambda: torch.get_device_module(device.type).synchronize(device)) if device.type != "cpu" else (lambda: None)

    # DDP: identical weights on every rank after training on different data.
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(5):
        opt.zero_grad()
        x, y = torch.randn(32, 64, generator=g).to(device), torch.randn(32, 8, generator=g).to(device)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    checksum = torch.cat([p.detach().flatten() for p in model.parameters()]).double().sum().reshape(1)
    gathered = [torch.empty_like(checksum) for _ in range(world)]
    dist.all_gather(gathered, checksum)
    ddp_consistent = all(float(c) == float(gathered[0]) for c in gathered)

    rows = []
    sizes = list(_sizes_mib(args.min_mib, args.max_mib))
    for index, size_mib in enumerate(sizes):
        buf = torch.ones(size_mib * 2**20 // 4, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        sync()
        times = []
        iters = args.iters if size_mib < 256 else max(3, args.iters // 4)
        for _ in range(iters):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(buf)
            sync()
            times.append(time.perf_counter() - start)
        seconds = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        seconds = float(seconds)
        algbw = size_mib * 2**20 / seconds / 1e9
        rows.append({"size_mib": size_mib, "time_ms": seconds * 1e3, "algbw_gbps": algbw,
                     "busbw_gbps": algbw * 2 * (world - 1) / world})
        del buf
        if rank == 0:
            Path(os.environ["KP_BENCH_PROGRESS"]).write_text(f"{index + 1}/{len(sizes)}")
    if rank == 0:
        Path(os.environ["KP_BENCH_OUT"]).write_text(json.dumps({
            "device_type": device.type, "world_size": world, "backend": group.backend,
            "devices": [str(torch.device(device.type, i)) if device.type != "cpu" else "cpu" for i in range(world)],
            "device_name": (torch.get_device_module(device.type).get_device_name(device)
                            if device.type != "cpu" else "cpu"),
            "ddp_weights_identical_across_ranks": ddp_consistent,
            "all_reduce": rows}))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device-type", default="cuda", help="torch device type of the mesh (default cuda)")
    parser.add_argument("--min-mib", type=int, default=1)
    parser.add_argument("--max-mib", type=int, default=1024)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", help="also write the report to this file")
    parser.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank_main:
        _rank_main(args)
        return 0

    world = sum(m.world_size for m in _meshes(args.device_type))
    workdir = tempfile.mkdtemp(prefix="kp_mesh_allreduce_")
    env = dict(os.environ, WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               KP_BENCH_OUT=os.path.join(workdir, "report.json"), KP_BENCH_PROGRESS=os.path.join(workdir, "progress"))
    command = [sys.executable, os.path.abspath(__file__), "--rank-main", "--device-type", args.device_type,
               "--min-mib", str(args.min_mib), "--max-mib", str(args.max_mib),
               "--iters", str(args.iters), "--warmup", str(args.warmup)]
    procs = [subprocess.Popen(command, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, f"rank{r}.log"), "w"))
             for r in range(world)]
    total = len(list(_sizes_mib(args.min_mib, args.max_mib)))
    while any(p.poll() is None for p in procs) and not any(p.poll() not in (None, 0) for p in procs):
        progress = Path(env["KP_BENCH_PROGRESS"])
        done = int(progress.read_text().split("/")[0]) if progress.exists() else 0
        sys.stderr.write(f"\rall_reduce over {world} x {args.device_type} [{'#' * (30 * done // total):.<30}] "
                         f"{done}/{total}")
        sys.stderr.flush()
        time.sleep(0.5)
    for p in procs:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
    sys.stderr.write("\n")
    if any(p.returncode != 0 for p in procs):
        logs = "\n".join(Path(workdir, f"rank{r}.log").read_text()[-3000:] for r in range(world))
        raise SystemExit(f"a rank failed:\n{logs}")
    report = json.loads(Path(env["KP_BENCH_OUT"]).read_text())
    for row in report["all_reduce"]:
        print(f"{row['size_mib']:>6} MiB  {row['time_ms']:9.3f} ms  busbw {row['busbw_gbps']:8.2f} GB/s",
              file=sys.stderr)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0 if report["ddp_weights_identical_across_ranks"] else 1


if __name__ == "__main__":
    sys.exit(main())
