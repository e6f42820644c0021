"""Intra-op threads of my_asic host kernels on the autograd engine's device thread.

A backward on my_asic runs on the engine's device thread (pt_autograd_N). If
its host kernels parallelise there, OpenMP and MKL give the process a second
thread pool, more OpenMP threads than CPUs, and libgomp then puts idle pool
threads to sleep after every parallel region for the rest of the process:
every later parallel region, on the CPU too, pays a wake-up per thread.
(csrc/aten/autograd_device_threads.h.) Each test runs in a fresh process with
two intra-op threads, because a pool, once started, stays for the process.
"""

import pytest
import torch

from device_subprocess import last_line, run_python

pytestmark = pytest.mark.skipif(
    "OpenMP" not in torch.__config__.parallel_info(), reason="torch is not built with OpenMP"
)

PRELUDE = """
    import os, torch, kernel_pytorch
    torch.set_num_threads(2)

    def threads_named(name):
        return sum(open(f"/proc/self/task/{t}/comm").read().strip() == name for t in os.listdir("/proc/self/task"))

    def threads_on_backward_thread(x):
        # torch's thread count on the device thread after it ran x * 2's backward
        seen = []
        def hook(grad):
            seen.append(torch.get_num_threads())
            return grad
        handle = x.register_hook(hook)
        (x * 2).sum().backward()
        handle.remove()
        return seen[0]
"""


def test_a_small_training_step_on_my_asic_starts_no_second_openmp_pool():
    # OpenMP workers inherit the name of the thread that started their pool.
    out = run_python(PRELUDE + """
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).to("my_asic")
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    x = torch.randn(8, 16, 64, device="my_asic")
    for _ in range(3):
        opt.zero_grad()
        layer(x).square().mean().backward()
        opt.step()
    print(threads_named("pt_autograd_0"))
    """)
    assert last_line(out) == "1"


def test_host_kernels_on_the_autograd_device_thread_start_with_one_intra_op_thread():
    out = run_python(PRELUDE + """
    x = torch.randn(4, 4, device="my_asic", requires_grad=True)
    print(threads_on_backward_thread(x), kernel_pytorch._C._intra_op_threads_limited())
    """)
    assert last_line(out) == "1 False"  # the main thread is never limited


def test_a_large_operand_gives_the_autograd_device_thread_torch_thread_count():
    out = run_python(PRELUDE + """
    small = torch.randn(4, 4, device="my_asic", requires_grad=True)
    before = threads_on_backward_thread(small)
    big = torch.randn(512, 256, device="my_asic", requires_grad=True)
    (big @ torch.randn(256, 256, device="my_asic")).sum().backward()
    print(before, threads_on_backward_thread(small))
    """)
    assert last_line(out) == "1 2"


def test_the_main_thread_keeps_torch_thread_count():
    out = run_python(PRELUDE + """
    x = torch.randn(4, 4, device="my_asic", requires_grad=True)
    threads_on_backward_thread(x)
    (x @ x).relu().sum()
    print(torch.get_num_threads())
    """)
    assert last_line(out) == "2"

