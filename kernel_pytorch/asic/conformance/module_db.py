"""PyTorch's module database (module_db) on my_asic against the CPU, float32.

Each module is built on the CPU, deep-copied to my_asic, and run on the same
inputs: outputs, input gradients and parameter gradients must agree (values
for deterministic modules, shapes for random ones), or both raise.

The worker runs in child processes (:func:`run_modules`), so a crash ends one
module, not the sweep; runnable by hand (``MY_ASIC_RUNTIME`` chooses the runtime):

    python -m kernel_pytorch.asic.conformance.module_db --items nn.Linear,nn.LSTM [--inputs 2]

It prints one JSON line per ModuleInfo: {"id": ..., "result": "pass" | "fail: ..." | "skip: ..."}.
"""

import argparse
import copy
import sys

import torch
import torch.utils._pytree as pytree

import kernel_pytorch  # noqa: F401  (registers my_asic)
from kernel_pytorch.asic.conformance.runner import emit, emit_all, first_line, list_items, run_items

DEVICE = "my_asic"
RANDOM_MODULES = ("Dropout", "RReLU", "FractionalMaxPool", "AlphaDropout", "FeatureAlphaDropout")


def module_id(info):
    return info.name  # "nn.Linear", unique in module_db


def move(tree, device, requires_grad):
    """``tree`` with its tensors on ``device``; a tensor passed twice stays one tensor."""
    moved = {}

    def to(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in moved:
            m = t.detach().to(device)
            moved[id(t)] = m.requires_grad_(True) if requires_grad and t.requires_grad and m.is_floating_point() else m
        return moved[id(t)]

    return pytree.tree_map(to, tree)


def run(module, args, kwargs):
    torch.manual_seed(0)
    out = module(*args, **kwargs)
    tensors = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    diff = [t for t in tensors if t.requires_grad]
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
    params = [p for p in module.parameters() if p.requires_grad]
    grads = ()
    if diff:
        grads = torch.autograd.grad(sum(t.float().sum() for t in diff), inputs + params, allow_unused=True)
    return tensors, grads


def compare(expected, got, values):
    for e, g in zip(pytree.tree_leaves(expected), pytree.tree_leaves(got)):
        if e is None or g is None:
            if (e is None) != (g is None):
                raise AssertionError("a gradient is missing on one device")
            continue
        if g.device.type != DEVICE:
            raise AssertionError(f"result on {g.device}, not on my_asic")
        if values:
            torch.testing.assert_close(g.detach().cpu(), e.detach(), equal_nan=True, atol=1e-3, rtol=1e-3)
        elif g.shape != e.shape:
            raise AssertionError(f"shape {tuple(g.shape)} vs CPU {tuple(e.shape)}")


def check(info, dtype, max_inputs):
    values = not any(name in info.module_cls.__name__ for name in RANDOM_MODULES)
    module_inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True, training=True)
    for module_input in module_inputs[:max_inputs]:
        if module_input.forward_input is None:
            continue
        c = module_input.constructor_input
        torch.manual_seed(0)
        cpu_module = info.module_cls(*c.args, **c.kwargs).to(dtype)
        # A lazy module initialises its parameters at its first forward, from the generator of
        # the device it runs on; a device with its own random entry draws other values than
        # the CPU (as CUDA does), so it gets a copy of the parameters the CPU drew.
        lazy = isinstance(cpu_module, torch.nn.modules.lazy.LazyModuleMixin) and cpu_module.has_uninitialized_params()
        dev_module = None if lazy else copy.deepcopy(cpu_module).to(DEVICE)
        f = module_input.forward_input
        try:
            expected = run(cpu_module, f.args, f.kwargs)
            if lazy:
                dev_module = copy.deepcopy(cpu_module).to(DEVICE)
        except Exception as cpu_error:
            if dev_module is None:
                dev_module = copy.deepcopy(cpu_module).to(DEVICE)
            try:
                run(dev_module, move(f.args, DEVICE, True), move(f.kwargs, DEVICE, True))
            except Exception:
                continue
            raise AssertionError(f"CPU raised {type(cpu_error).__name__}, my_asic did not")
        got = run(dev_module, move(f.args, DEVICE, True), move(f.kwargs, DEVICE, True))
        compare(expected, got, values)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", required=True, help="comma-separated ModuleInfo names (nn.Linear, ...), or 'all'")
    parser.add_argument("--inputs", type=int, default=2, help="module inputs per module (first N)")
    args = parser.parse_args(argv)

    from torch.testing._internal.common_modules import module_db

    by_id = {module_id(info): info for info in module_db}
    if args.items == "all":
        emit_all(by_id)
        return 0
    for name in args.items.split(","):
        info = by_id.get(name)
        if info is None:
            result = "skip: not in module_db"
        elif torch.float32 not in info.supported_dtypes("cpu"):
            result = "skip: float32 not in its dtypes"
        else:
            try:
                check(info, torch.float32, args.inputs)
                result = "pass"
            except Exception as e:  # reported per module
                result = "fail: " + first_line(e)
        emit(name, result)
    return 0


# Modules of each kind: linear and bilinear, convolutions and their transposes,
# pooling, normalisation, activations, recurrent cells and layers, attention and
# transformer layers, embeddings, losses, padding, a random one (shapes only).
REPRESENTATIVE = [
    "nn.Linear", "nn.Bilinear", "nn.Conv1d", "nn.Conv2d", "nn.ConvTranspose2d", "nn.MaxPool2d", "nn.AvgPool2d",
    "nn.AdaptiveAvgPool2d", "nn.BatchNorm2d", "nn.LayerNorm", "nn.GroupNorm", "nn.RMSNorm", "nn.ReLU", "nn.GELU",
    "nn.SiLU", "nn.Softmax", "nn.LogSoftmax", "nn.Embedding", "nn.LSTM", "nn.GRU", "nn.RNN",
    "nn.MultiheadAttention", "nn.TransformerEncoderLayer", "nn.CrossEntropyLoss", "nn.MSELoss", "nn.NLLLoss",
    "nn.FractionalMaxPool2d", "nn.PReLU", "nn.ReflectionPad2d", "nn.LSTMCell", "nn.BCEWithLogitsLoss", "nn.CTCLoss",
]
WORKER = "kernel_pytorch.asic.conformance.module_db"
TIMEOUT_S = 1800


def all_module_ids(runtime):
    """Every ModuleInfo name of module_db, listed by a child process."""
    return list_items(WORKER, runtime)


def run_modules(modules, runtime, inputs=2, progress=None, chunk=None, jobs=1):
    """``{module id: result}``: the module a child dies or hangs in is a crash, the rest go on
    (``chunk`` modules per child process; default all in one; ``jobs`` chunks side by side)."""
    part = run_items(WORKER, modules, runtime, ["--inputs", str(inputs)], timeout_s=TIMEOUT_S, progress=progress,
                     chunk=chunk, jobs=jobs)  # fmt: skip
    return {module: entry["result"] for module, entry in part.items()}


if __name__ == "__main__":
    sys.exit(main())
