"""The batch-growing training loop of tests/asic/test_training_under_memory_pressure.py, on CUDA.

The HAL's monitor reads CUDA's device-wide use (mem_get_info) and the HAL's
error handler sees CUDA's out-of-memory errors through the caching
allocator's OOM observer; CUDA has no retry hook, so the error still reaches
the loop, which frees what it keeps and carries on at a smaller batch. Skipped without a CUDA device (the GPU machine runs it).
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

SCRIPT = """
import torch, kernel_pytorch
from kernel_pytorch.hardware_abstraction import MemoryMonitor, set_error_handler

log, kept = [], []

def handler(error):
    # Runs inside CUDA's caching allocator, before the error is raised: it
    # records; freeing CUDA memory is done where the error arrives.
    log.append("handler:" + error.kind + ":" + error.device)

set_error_handler(handler)
torch.manual_seed(0)
model = torch.nn.Linear(1024, 8, device="cuda")  # small activations: the batch itself runs out
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
batch, largest, good_steps_after, finite = 1 << 16, 0, 0, True
monitor = MemoryMonitor("cuda:0", warning=0.90, critical=0.95, interval_s=3600,
                        on_warning=lambda e: log.append("warning"), on_critical=lambda e: log.append("critical"))
with monitor:
    while good_steps_after < 3:
        handled = any(entry.startswith("handler") for entry in log)
        try:
            x = torch.randn(batch, 1024, device="cuda")
            loss = model(x).square().mean()
            opt.zero_grad(); loss.backward(); opt.step()
            finite = finite and bool(torch.isfinite(loss).item())
            if handled:
                good_steps_after += 1
            else:
                kept.append(x)
                largest = batch
                batch = batch * 103 // 100  # 3% more per step: no threshold is jumped over
        except torch.OutOfMemoryError:
            x = loss = None
            kept.clear()
            torch.cuda.empty_cache()
            batch //= 2  # carry on smaller
        monitor.check()
first = [entry for i, entry in enumerate(log) if entry not in log[:i]]
print(first, finite, batch < largest, len(kept))
"""


def test_growing_batch_on_cuda_gets_warning_critical_then_handler_and_continues(tmp_path):
    # A CUDA user's process: my_asic stays unregistered beside CUDA (with it,
    # torch's autograd asserts on CUDA leaves: docs/my_asic.md, "Beside a GPU").
    env = {k: v for k, v in os.environ.items() if k != "MY_ASIC_ENABLE"}
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-2000:]
    last = completed.stdout.strip().splitlines()[-1]
    assert last == "['warning', 'critical', 'handler:out_of_memory:cuda:0'] True True 0", completed.stdout[-2000:]
