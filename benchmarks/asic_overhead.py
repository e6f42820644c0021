"""What my_asic costs over plain CPU, measured side by side in one run.

The reference device is a simulator whose memory is host memory, so the
honest comparison is against the same work on the CPU: the ratio is the
overhead of the PrivateUse1 glue (dispatch, host views, the runtime's
streams), not a speed claim about hardware.

    python benchmarks/asic_overhead.py [--quick] [--json results.json]

Prints one row per measurement with the median time of each side, the ratio
my_asic / CPU (for bandwidth: my_asic / CPU, higher is better) and the goal.
"""

import argparse
import json
import statistics
import sys
import time

import torch

import kernel_pytorch  # noqa: F401  (registers my_asic)


def median_seconds(fn, repeats: int, inner: int) -> float:
    """Median over ``repeats`` of the mean time of ``inner`` calls, in seconds."""
    fn()  # warm up: caches, allocator pools, lazy init
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def interleaved(fn_cpu, fn_dev, repeats: int, inner: int, rounds: int = 3):
    """Alternates the two sides so drift on a shared machine hits both."""
    cpu, dev = [], []
    for _ in range(rounds):
        cpu.append(median_seconds(fn_cpu, repeats, inner))
        dev.append(median_seconds(fn_dev, repeats, inner))
    return min(cpu), min(dev)


ROWS = 10  # measurements in a full run, for the progress line
_records = []


def progress(name):
    """One progress line on stderr (kept off stdout, which holds the table)."""
    print(f"[{len(_records) + 1}/{ROWS}] {name} ...", file=sys.stderr, flush=True)


def row(name, cpu_s, dev_s, goal, higher_is_better=False):
    """Prints one table row and records it for --json; returns whether the goal is met."""
    if higher_is_better:
        ratio = cpu_s / dev_s  # bandwidth ratio = (bytes/dev_s) / (bytes/cpu_s)
        ok = ratio >= goal
        goal_text = f">= {goal:.2f}x"
    else:
        ratio = dev_s / cpu_s
        ok = ratio <= goal
        goal_text = f"<= {goal:.2f}x"
    print(f"{name:<56} {cpu_s * 1e6:>12.1f} {dev_s * 1e6:>12.1f} {ratio:>8.2f}x {goal_text:>9} {'PASS' if ok else 'MISS'}")
    _records.append({
        "measurement": name, "cpu_us": cpu_s * 1e6, "my_asic_us": dev_s * 1e6, "ratio": ratio,
        "goal": goal_text, "met": ok,
    })
    return ok


def _transformer_step(device):
    """One training step (forward, backward, AdamW) of a 2-layer, width-64 encoder."""
    torch.manual_seed(0)
    encoder = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True), 2, enable_nested_tensor=False
    ).to(device)
    head = torch.nn.Linear(64, 10).to(device)
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(8, 16, 64, generator=gen).to(device)
    y = torch.randint(0, 10, (8,), generator=gen).to(device)

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(encoder(x).mean(1)), y)
        loss.backward()
        optimizer.step()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats (CI smoke run)")
    parser.add_argument("--json", help="also write the rows here (JSON)")
    args = parser.parse_args()
    quick = args.quick
    torch.manual_seed(0)
    dev = torch.device("my_asic")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {torch.my_asic.get_device_name(0)}")
    print(f"{'measurement':<56} {'cpu (us)':>12} {'my_asic (us)':>12} {'ratio':>9} {'goal':>9}")
    results = []

    a, b = torch.randn(16), torch.randn(16)
    da, db = a.to(dev), b.to(dev)
    progress("small op")
    cpu_s, dev_s = interleaved(lambda: a + b, lambda: da + db, repeats=15, inner=2000 if not quick else 300)
    results.append(row("small op: add of 16 floats (latency)", cpu_s, dev_s, 1.3))

    # A layer's worth of small ops: each side runs the same module from the same weights.
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64)
    dlinear, dx = torch.nn.Linear(64, 64).to(dev), x.to(dev)
    dlinear.load_state_dict(linear.state_dict())
    progress("small layer")
    cpu_s, dev_s = interleaved(
        lambda: torch.relu(linear(x)).sum(), lambda: torch.relu(dlinear(dx)).sum(), repeats=15,
        inner=1000 if not quick else 200,
    )
    results.append(row("small layer: Linear(64,64) + ReLU + sum, forward", cpu_s, dev_s, 1.2))

    step_cpu, step_dev = _transformer_step("cpu"), _transformer_step(dev)
    progress("training step")
    cpu_s, dev_s = interleaved(step_cpu, step_dev, repeats=7, inner=20 if not quick else 5)
    results.append(row("training step: small Transformer encoder + AdamW", cpu_s, dev_s, 1.2))

    n = (1 << 24) if not quick else (1 << 20)
    a, b = torch.randn(n), torch.randn(n)
    da, db = a.to(dev), b.to(dev)
    out, dout = torch.empty(n), torch.empty(n, device=dev)
    progress("large elementwise, out=")
    cpu_s, dev_s = interleaved(
        lambda: torch.mul(a, b, out=out), lambda: torch.mul(da, db, out=dout), repeats=5, inner=5
    )
    results.append(row(f"large elementwise: mul of {n >> 20}M floats, out=", cpu_s, dev_s, 1.1))
    # Functional form: the CPU side also pays the OS for fresh pages each call,
    # my_asic reuses its caching allocator's blocks; shown for completeness.
    progress("large elementwise, new output")
    cpu_s, dev_s = interleaved(lambda: a * b, lambda: da * db, repeats=5, inner=5)
    results.append(row(f"large elementwise: mul of {n >> 20}M floats, new output", cpu_s, dev_s, 1.1))

    m = 4096 if not quick else 512
    x, y = torch.randn(m, m), torch.randn(m, m)
    dx, dy = x.to(dev), y.to(dev)
    progress("matmul")
    cpu_s, dev_s = interleaved(lambda: x @ y, lambda: dx @ dy, repeats=3, inner=1, rounds=2)
    results.append(row(f"large fallback op: matmul {m}x{m}", cpu_s, dev_s, 1.1))

    nbytes = (256 << 20) if not quick else (16 << 20)
    mib = nbytes >> 20
    host = torch.randn(nbytes // 4)
    host_dst = torch.empty_like(host)
    on_dev = host.to(dev)
    # Bandwidth proper: both sides copy into memory that already exists.
    progress("host->device copy_")
    cpu_s, dev_s = interleaved(lambda: host_dst.copy_(host), lambda: on_dev.copy_(host), repeats=5, inner=3)
    results.append(row(f"host->device {mib} MiB into existing tensor (vs copy_)", cpu_s, dev_s, 0.8, True))
    progress("device->host copy_")
    cpu_s, dev_s = interleaved(lambda: host_dst.copy_(host), lambda: host_dst.copy_(on_dev), repeats=5, inner=3)
    results.append(row(f"device->host {mib} MiB into existing tensor (vs copy_)", cpu_s, dev_s, 0.8, True))
    # With allocation: .to()/.cpu() against clone(), as a user writes them.
    progress("host->device .to()")
    cpu_s, dev_s = interleaved(lambda: host.clone(), lambda: host.to(dev), repeats=5, inner=3)
    results.append(row(f"host->device {mib} MiB with .to() (vs clone)", cpu_s, dev_s, 0.8, True))
    progress("device->host .cpu()")
    cpu_s, dev_s = interleaved(lambda: host.clone(), lambda: on_dev.cpu(), repeats=5, inner=3)
    results.append(row(f"device->host {mib} MiB with .cpu() (vs clone)", cpu_s, dev_s, 0.8, True))

    print(f"{sum(results)} of {len(results)} goals met")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "quick": quick,
                       "rows": _records}, f, indent=1)


if __name__ == "__main__":
    main()
