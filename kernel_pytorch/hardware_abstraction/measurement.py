"""Measured (not theoretical) performance of a device: matmul TFLOPS, copy GB/s, a step.

The HAL's peak tables say what a device could do; these functions time what it does, so
that demos and benchmarks can put achieved figures beside the theoretical ones
(``efficiency = achieved / peak``).  Every timing synchronises the device before the
clock is read (``torch.<type>.synchronize``), repeats until ``min_time_s`` has passed and
keeps the best repeat (the least disturbed by other work on a shared machine).

Units: seconds, TFLOPS (1e12 FLOP/s, a matmul of n x n by n x n counted as 2 n^3 FLOP),
GB/s (1e9 bytes per second).

OpenCL devices hold no torch tensors; :func:`measure_opencl_matmul` runs the same matmul
as an OpenCL kernel through ``pyopencl`` instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

from .hal_core import BYTES_PER_GB, DeviceSpec, precision_key

__all__ = [
    "Timing",
    "synchronize",
    "time_call",
    "MatmulMeasurement",
    "measure_matmul",
    "measure_opencl_matmul",
    "CopyMeasurement",
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


def measure_opencl_matmul(spec: DeviceSpec, n: int = 512, min_time_s: float = 0.2,
                          check: bool = True) -> MatmulMeasurement:
    """Time an fp32 n x n matmul as an OpenCL kernel (16 x 16 tiles) on an OpenCL device.

    ``spec`` is a HAL OpenCL device (``details["platform"]``/``["device_index"]`` locate
    it, as ``OpenCLAdapter`` recorded them).  With ``check`` the result is compared with
    torch's CPU matmul first.

    Raises:
        RuntimeError: pyopencl is missing or the device cannot be found.
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
    timing = time_call(run, torch.device("cpu"), min_time_s)
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


def measure_copy_bandwidth(device: torch.device, nbytes: int = 64 * 2**20,
                           min_time_s: float = 0.2) -> CopyMeasurement:
    """Host -> device and device -> host copy bandwidth of ``nbytes``, GB/s.

    The host buffer is pinned when ``device`` is torch's current accelerator.  On the
    CPU both directions are a host memory copy.
    """
    host = torch.empty(nbytes, dtype=torch.uint8)
    accelerator = torch.accelerator.current_accelerator()
    # Tensor.pin_memory() pins for the current accelerator (its device argument is
    # deprecated); other device types get pageable copies, and their figure says so.
    pinned = device.type != "cpu" and accelerator is not None and accelerator.type == device.type
    if pinned:
        host = host.pin_memory()
    on_device = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = time_call(lambda: on_device.copy_(host), device, min_time_s)
    d2h = time_call(lambda: host.copy_(on_device), device, min_time_s)
    return CopyMeasurement(str(device), nbytes, nbytes / h2d.best_s / BYTES_PER_GB, nbytes / d2h.best_s / BYTES_PER_GB, pinned)


def small_mlp(width: int = 256, depth: int = 4, classes: int = 10) -> torch.nn.Sequential:
    """The MLP the demos and the benchmark train: ``depth`` Linear+GELU blocks and a head."""
    layers: List[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    layers.append(torch.nn.Linear(width, classes))
    return torch.nn.Sequential(*layers)


def measure_training_step(device: torch.device, width: int = 256, depth: int = 4, batch: int = 64,
                          min_time_s: float = 0.2) -> Timing:
    """Seconds per forward + backward + AdamW step of :func:`small_mlp` on ``device``."""
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

    return time_call(step, device, min_time_s)
