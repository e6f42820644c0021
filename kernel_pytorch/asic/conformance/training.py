"""Training parity: small models train on my_asic as they do on the CPU.

From the same initial weights and data, each model trains for N steps on the CPU and
on my_asic; every step's loss must agree within float32 tolerance. The models cover
what a chip must get right for training: a CNN (convolution, batch norm, pooling,
their gradients, Adam's foreach arithmetic) and a tiny Llama (embedding, the
kernel_pytorch ops of the runtime's kernel table -- rms_norm, rope, attention, SwiGLU --
and their backward passes, SGD with momentum). The fallback counters of each run are
reported with the result, so a chip team sees which ops still ran on the CPU.

Worker (``MY_ASIC_RUNTIME`` chooses the runtime):

    python -m kernel_pytorch.asic.conformance.training --items cnn_adam,tiny_llama_sgd [--steps 20]
"""

import argparse
import copy
import sys

import torch
import torch.nn as nn

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.asic.conformance.runner import emit, first_line

DEVICE = "my_asic"
# Losses agree to float32 rounding: the kernels may sum in another order than the CPU.
LOSS_RTOL, LOSS_ATOL = 1e-4, 1e-5


def _cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3), nn.Tanh(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )  # fmt: skip


def _tiny_llama():
    from kernel_pytorch.ops import TinyLlama

    return TinyLlama(vocab_size=64, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                     intermediate_size=128, max_positions=64)  # fmt: skip


def _cross_entropy(logits, targets):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


CASES = {
    # name: (model factory, batch factory, optimizer factory)
    "cnn_adam": (
        _cnn,
        lambda g: (torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g)),
        lambda p: torch.optim.Adam(p, lr=1e-3),
    ),
    "tiny_llama_sgd": (
        _tiny_llama,
        lambda g: (torch.randint(0, 64, (4, 16), generator=g), torch.randint(0, 64, (4, 16), generator=g)),
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
    ),
}


def train(model, batch, make_optimizer, device, steps):
    """Losses of ``steps`` optimizer steps of ``model`` on ``device``."""
    model = model.to(device)
    optimizer = make_optimizer(model.parameters())
    inputs, targets = (t.to(device) for t in batch)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = _cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return model, losses


def one_intra_op_thread():
    """Both sides compute with one intra-op thread, so CPU reductions sum alike; returns
    the calling thread's previous count.

    Some CPU reductions (oneDNN's convolution gradients, say) sum in an order that
    depends on the thread count. A backward on my_asic runs on the autograd engine's
    device thread, which keeps its own count: a gradient hook sets it there.
    """
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    x = torch.zeros(1, device=DEVICE, requires_grad=True)
    x.register_hook(lambda grad: torch.set_num_threads(1))
    (x * 1).sum().backward()
    return previous


def check(name, steps):
    """``(result, extra)`` of one training case."""
    from kernel_pytorch import asic

    make_model, make_batch, make_optimizer = CASES[name]
    torch.manual_seed(0)
    reference = make_model()
    batch = make_batch(torch.Generator().manual_seed(1))
    _, cpu_losses = train(copy.deepcopy(reference), batch, make_optimizer, "cpu", steps)
    asic.reset_fallback_stats()
    device_model, device_losses = train(copy.deepcopy(reference), batch, make_optimizer, DEVICE, steps)
    extra = {"fallback": asic.fallback_stats(), "cpu_losses": cpu_losses, "device_losses": device_losses}
    wrong_device = [n for n, p in device_model.named_parameters() if p.device.type != DEVICE]
    if wrong_device:
        return f"fail: parameters left my_asic: {', '.join(wrong_device[:3])}", extra
    for step, (expected, got) in enumerate(zip(cpu_losses, device_losses)):
        if not abs(got - expected) <= LOSS_ATOL + LOSS_RTOL * abs(expected):
            return (f"fail: step {step + 1} of {steps}: loss {got!r} on my_asic, {expected!r} on the CPU "
                    f"(tolerance rtol={LOSS_RTOL}, atol={LOSS_ATOL})"), extra
    return "pass", extra


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True, help=f"comma-separated cases ({', '.join(CASES)}) or 'all'")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps per model")
    args = parser.parse_args(argv)
    one_intra_op_thread()
    for name in (list(CASES) if args.items == "all" else args.items.split(",")):
        if name not in CASES:
            emit(name, "skip: no such case")
            continue
        try:
            result, extra = check(name, args.steps)
        except Exception as error:  # a failure is data, reported per case
            result, extra = "fail: " + first_line(error), {}
        emit(name, result, **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
