"""Measured (not theoretical) performance of a device: matmul TFLOPS, copy GB/s, a step.

The HAL's peak tables say what a device could do; these functions time what it does, so
that demos and benchmarks can put achieved figures beside the theoretical ones
(``efficiency = achieved / peak``).  Every timing synchronises the device before the
clock is read (``torch.<type>.synchronize``).  The ``measure_*`` functions repeat until
``min_time_s`` has passed and keep the best repeat; :func:`time_interleaved` compares
several workloads on a shared, noisy machine: warm-up, interleaved rounds, medians and
the round-to-round spread, so a stall hits every workload alike instead of deciding a
comparison.

Units: seconds, TFLOPS (1e12 FLOP/s, a matmul of n x n by n x n counted as 2 n^3 FLOP),
GB/s (1e9 bytes per second).

OpenCL devices hold no torch tensors; :func:`measure_opencl_matmul` runs the same matmul
as an OpenCL kernel through ``pyopencl`` instead.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import torch

from .hal_core import BYTES_PER_GB, DeviceSpec, precision_key

__all__ = [
    "Timing",
    "synchronize",
    "time_call",
    "InterleavedTiming",
    "time_interleaved",
    "training_step",
    "MatmulMeasurement",
    "measure_matmul",
    "opencl_matmul",
    "measure_opencl_matmul",
    "CopyMeasurement",
    "copy_workloads",
    "measure_copy_bandwidth",
    "measure_training_step",
    "small_mlp",
]


@dataclass(frozen=True)
class Timing:
    """Best and median seconds per call over ``samples`` repeats."""

    best_s: float
    median_s: float
    samples: int


def synchronize(device: torch.device) -> None:
    """Wait for all work queued on ``device`` (no-op on the CPU)."""
    if device.type == "cpu":
        return
    module = getattr(torch, device.type, None)
    if module is not None and hasattr(module, "synchronize"):
        module.synchronize(device)


def time_call(fn: Callable[[], object], device: torch.device, min_time_s: float = 0.2,
              min_repeats: int = 3, warmup: int = 1) -> Timing:
    """Seconds per ``fn()`` call on ``device``, synchronised, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    samples: List[float] = []
    deadline = time.perf_counter() + min_time_s
    while len(samples) < min_repeats or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        synchronize(device)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return Timing(samples[0], samples[len(samples) // 2], len(samples))


@dataclass(frozen=True)
class MatmulMeasurement:
    """An n x n matmul on one device: achieved TFLOPS beside the HAL's peak."""

    device: str
    dtype: str
    n: int
    seconds: float
    """Best time of one matmul, s."""
    achieved_tflops: float
    peak_tflops: Optional[float]
    """The HAL's dense theoretical peak for ``dtype``, TFLOPS; None when unknown."""

    @property
    def efficiency(self) -> Optional[float]:
        """achieved / peak (0..1); None when the peak is unknown."""
        return None if not self.peak_tflops else self.achieved_tflops / self.peak_tflops


def _peak(spec: Optional[DeviceSpec], dtype) -> Optional[float]:
    return None if spec is None else spec.capabilities.peak_tflops_for(dtype)


def measure_matmul(device: torch.device, n: int = 1024, dtype: torch.dtype = torch.float32,
                   spec: Optional[DeviceSpec] = None, min_time_s: float = 0.2) -> MatmulMeasurement:
    """Time ``a @ b`` for n x n operands of ``dtype`` on ``device``.

    ``spec`` (the HAL's description of the device) supplies the peak for the efficiency.
    """
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=generator).to(device=device, dtype=dtype)
    timing = time_call(lambda: torch.mm(a, b), device, min_time_s)
    return MatmulMeasurement(str(device), precision_key(dtype), n, timing.best_s,
                             2 * n**3 / timing.best_s / 1e12, _peak(spec, dtype))


_OPENCL_MATMUL = """
#define TILE 16
__kernel void matmul(const int n, __global const float* a, __global const float* b,
                     __global float* c) {
    const int row = get_global_id(1), col = get_global_id(0);
    const int lr = get_local_id(1), lc = get_local_id(0);
    __local float ta[TILE][TILE], tb[TILE][TILE];
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        ta[lr][lc] = a[row * n + t + lc];
        tb[lr][lc] = b[(t + lr) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TILE; ++k) acc = fma(ta[lr][k], tb[k][lc], acc);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = acc;
}
"""


def opencl_matmul(spec: DeviceSpec, n: int = 512, check: bool = True) -> Callable[[], None]:
    """A prepared fp32 n x n matmul as an OpenCL kernel (16 x 16 tiles) on an OpenCL
    device; each call runs it once and waits for it (``queue.finish()``).

    ``spec`` is a HAL OpenCL device (``details["platform"]``/``["device_index"]`` locate
    it, as ``OpenCLAdapter`` recorded them).  With ``check`` the result is compared with
    torch's CPU matmul first.

    Raises:
        RuntimeError: pyopencl is missing, the device cannot be found or its result is wrong.
        ValueError: ``n`` not a multiple of 16.
    """
    if n % 16:
        raise ValueError(f"n must be a multiple of 16 (the kernel's tile), got {n}")
    try:
        import numpy as np
        import pyopencl as cl
    except ImportError as error:
        raise RuntimeError(f"OpenCL matmul needs pyopencl ({error}); pip install pyopencl") from None
    device = _opencl_device(cl, spec)
    context = cl.Context([device])
    queue = cl.CommandQueue(context)
    program = cl.Program(context, _OPENCL_MATMUL).build()
    kernel = cl.Kernel(program, "matmul")
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator)
    b = torch.randn(n, n, generator=generator)
    flags = cl.mem_flags
    a_buf = cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=a.numpy())
    b_buf = cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=b.numpy())
    c_buf = cl.Buffer(context, flags.WRITE_ONLY, size=n * n * 4)

    def run() -> None:
        kernel(queue, (n, n), (16, 16), np.int32(n), a_buf, b_buf, c_buf)
        queue.finish()

    if check:
        run()
        result = np.empty((n, n), dtype=np.float32)
        cl.enqueue_copy(queue, result, c_buf)
        expected = (a.double() @ b.double()).float()
        if not torch.allclose(torch.from_numpy(result), expected, rtol=1e-3, atol=1e-3 * n**0.5):
            raise RuntimeError(f"OpenCL matmul on {spec.name} disagrees with torch's CPU result")
    return run


def measure_opencl_matmul(spec: DeviceSpec, n: int = 512, min_time_s: float = 0.2,
                          check: bool = True) -> MatmulMeasurement:
    """Time :func:`opencl_matmul` (fp32, n x n) on an OpenCL device: best of repeats.

    Raises:
        RuntimeError: pyopencl is missing, the device cannot be found or its result is wrong.
        ValueError: ``n`` not a multiple of 16.
    """
    timing = time_call(opencl_matmul(spec, n, check), torch.device("cpu"), min_time_s)
    return MatmulMeasurement(f"opencl:{spec.index}", "fp32", n, timing.best_s,
                             2 * n**3 / timing.best_s / 1e12, _peak(spec, "fp32"))


def _opencl_device(cl, spec: DeviceSpec):
    details = spec.capabilities.details
    candidates = []
    for platform in cl.get_platforms():
        for device in platform.get_devices():
            candidates.append((platform, device))
    for platform, device in candidates:
        if device.name.strip() == spec.name and platform.name.strip() == details.get("platform", platform.name.strip()):
            return device
    if 0 <= spec.index < len(candidates):
        return candidates[spec.index][1]
    raise RuntimeError(f"OpenCL device {spec.index} ({spec.name}) not found by pyopencl")


@dataclass(frozen=True)
class CopyMeasurement:
    """Copy bandwidth between host memory and one device, GB/s."""

    device: str
    nbytes: int
    host_to_device_gbps: float
    device_to_host_gbps: float
    pinned: bool
    """Whether the host buffer was pinned (page-locked) memory."""


def copy_workloads(device: torch.device, nbytes: int = 64 * 2**20) -> Tuple[Callable[[], object], Callable[[], object], bool]:
    """Prepared copies of ``nbytes`` between host memory and ``device``: (host -> device,
    device -> host, pinned).

    The host buffer is pinned when ``device`` is torch's current accelerator (``pinned``
    says so).  On the CPU both directions are a host memory copy.
    """
    host = torch.empty(nbytes, dtype=torch.uint8)
    accelerator = torch.accelerator.current_accelerator()
    # Tensor.pin_memory() pins for the current accelerator (its device argument is
    # deprecated); other device types get pageable copies, and their figure says so.
    pinned = device.type != "cpu" and accelerator is not None and accelerator.type == device.type
    if pinned:
        host = host.pin_memory()
    on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return (lambda: on_device.copy_(host)), (lambda: host.copy_(on_device)), pinned


def measure_copy_bandwidth(device: torch.device, nbytes: int = 64 * 2**20,
                           min_time_s: float = 0.2) -> CopyMeasurement:
    """Host -> device and device -> host copy bandwidth of ``nbytes``, GB/s (best of repeats).

    The host buffer is pinned when ``device`` is torch's current accelerator.  On the
    CPU both directions are a host memory copy.
    """
    to_device, to_host, pinned = copy_workloads(device, nbytes)
    h2d = time_call(to_device, device, min_time_s)
    d2h = time_call(to_host, device, min_time_s)
    return CopyMeasurement(str(device), nbytes, nbytes / h2d.best_s / BYTES_PER_GB, nbytes / d2h.best_s / BYTES_PER_GB, pinned)


def small_mlp(width: int = 256, depth: int = 4, classes: int = 10) -> torch.nn.Sequential:
    """The MLP the demos and the benchmark train: ``depth`` Linear+GELU blocks and a head."""
    layers: List[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    layers.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*layers)


def training_step(device: torch.device, width: int = 256, depth: int = 4, batch: int = 64) -> Callable[[], None]:
    """A prepared forward + backward + AdamW step of :func:`small_mlp` on ``device``
    (seeded: every device trains the same model on the same data); call it to run one step."""
    torch.manual_seed(0)
    model = small_mlp(width, depth).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(batch, width, generator=generator).to(device)
    targets = torch.randint(0, 10, (batch,), generator=generator).to(device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()

    return step


def measure_training_step(device: torch.device, width: int = 256, depth: int = 4, batch: int = 64,
                          min_time_s: float = 0.2) -> Timing:
    """Seconds per forward + backward + AdamW step of :func:`small_mlp` on ``device``."""
    return time_call(training_step(device, width, depth, batch), device, min_time_s)


@dataclass(frozen=True)
class InterleavedTiming:
    """Seconds per call of one workload, measured by :func:`time_interleaved`."""

    median_s: float
    """Median over every timed call, s: the figure to report."""
    round_medians_s: Tuple[float, ...]
    """The median of each round, s: how the figure moved while the machine's load did."""
    samples: int
    """Timed calls (warm-up and each round's first call are not counted)."""

    @property
    def low_s(self) -> float:
        """The fastest round's median, s."""
        return min(self.round_medians_s)

    @property
    def high_s(self) -> float:
        """The slowest round's median, s."""
        return max(self.round_medians_s)

    @property
    def noise(self) -> float:
        """Half the interquartile range of the round medians, relative to the median
        (0.05 = +-5%): how much the figure moves from round to round, not swayed by one
        disturbed round as the min-max spread is."""
        if len(self.round_medians_s) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.round_medians_s, n=4, method="inclusive")
        return (q3 - q1) / (2 * self.median_s)

    def as_dict(self) -> Dict[str, object]:
        """JSON-ready: median_s, spread_s [low, high], noise, rounds, samples."""
        return {"median_s": self.median_s, "spread_s": [self.low_s, self.high_s], "noise": self.noise,
                "rounds": len(self.round_medians_s), "samples": self.samples}


# Pause before each workload's turn in a round, s: longer than libgomp's spin-wait after
# a parallel region (~10 ms), so the previous workload's idle OpenMP threads are asleep
# and do not take a core from the next one.
SETTLE_S = 0.02


def time_interleaved(workloads: Mapping[str, Tuple[Callable[[], object], torch.device]], rounds: int = 8,
                     budget_s: float = 0.4, warmup_s: float = 0.1, settle_s: float = SETTLE_S,
                     min_calls_per_round: int = 3, max_calls_per_round: int = 200,
                     batch_s: float = 1e-3) -> Dict[str, InterleavedTiming]:
    """Seconds per call of each ``name -> (fn, device)``, measured side by side.

    Each workload first warms up (at least ``warmup_s`` and 3 calls: a fresh process's
    first steps stall on one-time costs).  Then ``rounds`` rounds run every workload in
    turn: a ``settle_s`` pause, one uncounted call (it pays for the switch: cold caches,
    threads waking), then ``min_calls_per_round`` to ``max_calls_per_round`` timed calls,
    as many as fit all rounds together into about ``budget_s`` per workload (sized from
    the median warm-up call, so one stalled call does not shrink the sample); a turn that
    overruns twice its share of the budget ends early, after at least one timed call.  A call
    shorter than ``batch_s`` is timed in batches of calls (the clock and the
    synchronisation would otherwise dominate).  The device is synchronised after every
    batch.

    Raises:
        ValueError: no workloads, ``rounds`` < 1 or a negative time.
    """
    if not workloads:
        raise ValueError("time_interleaved needs at least one workload")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if min(budget_s, warmup_s, settle_s) < 0:
        raise ValueError(f"budget_s, warmup_s and settle_s must be >= 0, got {budget_s}, {warmup_s}, {settle_s}")
    plans = {}
    for name, (fn, device) in workloads.items():
        durations: List[float] = []
        deadline = time.perf_counter() + warmup_s
        while len(durations) < 4 or time.perf_counter() < deadline:
            start = time.perf_counter()
            fn()
            synchronize(device)
            durations.append(time.perf_counter() - start)
        one = max(statistics.median(durations[1:]), 1e-9)  # the first call pays one-time costs
        batch = max(1, int(batch_s / one))
        per_round = int(budget_s / rounds / (one * batch))
        plans[name] = (fn, device, batch, max(1, min_calls_per_round, min(max_calls_per_round, per_round)))
    samples: Dict[str, List[float]] = {name: [] for name in workloads}
    medians: Dict[str, List[float]] = {name: [] for name in workloads}
    for _ in range(rounds):
        for name, (fn, device, batch, reps) in plans.items():
            time.sleep(settle_s)
            fn()
            synchronize(device)
            this_round = []
            # A stalled machine must not stretch the run: a turn ends after twice its share
            # of the budget, with at least one timed call.
            turn_deadline = time.perf_counter() + 2 * budget_s / rounds
            for _ in range(reps):
                start = time.perf_counter()
                for _ in range(batch):
                    fn()
                synchronize(device)
                this_round.append((time.perf_counter() - start) / batch)
                if time.perf_counter() > turn_deadline:
                    break
            samples[name].extend(this_round)
            medians[name].append(statistics.median(this_round))
    return {name: InterleavedTiming(statistics.median(samples[name]), tuple(medians[name]), len(samples[name]) * plans[name][2])
            for name in workloads}

