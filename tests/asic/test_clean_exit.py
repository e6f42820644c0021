"""A script that ends right after a backward on my_asic exits with status 0.

Without kernel_pytorch's atexit hook (kernel_pytorch/asic/_exit.py) the
autograd device thread could be killed during interpreter finalisation and
the process abort (status 134) in about half of the runs, so one run proves
little: these tests run the script many times.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest

from device_subprocess import run_python_process

BACKWARD_THEN_EXIT = """
import torch, kernel_pytorch
x = torch.randn(3, 3, device="my_asic", requires_grad=True)
(x * 2).sum().backward()
"""

BACKWARD_ON_SECOND_DEVICE_THEN_EXIT = """
import torch, kernel_pytorch
x = torch.randn(3, 3, device="my_asic:1", requires_grad=True)
(x * 2).sum().backward()
"""

TRAINING_STEP_THEN_EXIT = """
import torch, kernel_pytorch
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("my_asic")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(4, 8, device="my_asic")).sum().backward()
opt.step()
"""


def exit_statuses(script, runs):
    """Exit statuses of ``runs`` fresh interpreters running ``script`` (2 at a time)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        completed = list(pool.map(lambda _: run_python_process(script), range(runs)))
    return [(c.returncode, c.stderr[-300:]) for c in completed]


def assert_all_clean(statuses):
    failures = [(rc, err) for rc, err in statuses if rc != 0]
    assert not failures, f"{len(failures)} of {len(statuses)} runs failed; first: {failures[0]}"


def test_exit_after_backward_is_clean_in_10_runs():
    assert_all_clean(exit_statuses(BACKWARD_THEN_EXIT, 10))


def test_exit_after_backward_on_second_device_is_clean_in_5_runs():
    assert_all_clean(exit_statuses(BACKWARD_ON_SECOND_DEVICE_THEN_EXIT, 5))


def test_exit_after_training_step_is_clean_in_5_runs():
    assert_all_clean(exit_statuses(TRAINING_STEP_THEN_EXIT, 5))


@pytest.mark.slow
def test_exit_after_backward_is_clean_in_100_runs():
    assert_all_clean(exit_statuses(BACKWARD_THEN_EXIT, 100))
