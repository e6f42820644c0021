"""The ``"my_asic"`` torch.compile backend: graphs stay on the device.

For runtimes whose memory is not host addressable (MY_ASIC_HOST_ADDRESSABLE=0,
an OpenCL runtime, a real chip), Inductor's C++ kernels cannot touch device
memory. This backend traces with AOT autograd (forward and backward graphs,
functionalised, decomposed as for Inductor's inputs) and runs each graph node
through the dispatcher, so the runtime's kernels and the CPU fallback apply
as in eager mode. ``torch.compile(model)`` picks it by default on such
runtimes (compile_registration.py), with a one-line notice.
"""

import logging

import torch

logger = logging.getLogger(__name__)

_noticed = False


def my_asic_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """torch.compile backend: AOT autograd graphs run through the my_asic dispatcher.

    Hand-written layers the kernel library fuses (RMSNorm) are replaced by its
    ops first (compile_patterns.py).
    """
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import default_partition

    from kernel_pytorch.asic import compile_patterns

    def run_through_dispatcher(graph: torch.fx.GraphModule, _inputs):
        return make_boxed_func(graph.forward)

    def run_inference_graph(graph: torch.fx.GraphModule, _inputs):
        # Also called with the forward half of a training graph, already rewritten
        # in the joint graph: the pattern is gone from it by then.
        compile_patterns.rewrite_inference_graph(graph)
        return make_boxed_func(graph.forward)

    def partition(joint: torch.fx.GraphModule, joint_inputs, **partition_kwargs):
        compile_patterns.rewrite_joint_graph(joint)
        return default_partition(joint, joint_inputs, **partition_kwargs)

    return aot_autograd(fw_compiler=run_inference_graph, bw_compiler=run_through_dispatcher,
                        partition_fn=partition)(gm, example_inputs, **kwargs)


# Inductor decides some things by device type where it means the kernel
# language: its scheduler keeps loop reordering/reindexing fusions away from
# "cpu" (C++) kernels ("not validated yet", torch/_inductor/scheduler.py), and
# utils.get_current_backend() names the language of any other device
# config.cuda_backend ("triton"), which steers dtype propagation. my_asic's
# kernels are the CPU's C++ kernels, so its graphs compile with these set as
# the CPU has them (only while a my_asic graph compiles).
#
# layout_optimization: with it on, Inductor makes a convolution's input and
# weight channels-last but, on a device that is neither the CPU (oneDNN
# lowering) nor CUDA, still expects the extern convolution to return the
# contiguous layout it computed before; ATen's convolution returns channels
# last for channels-last inputs, on my_asic as on the CPU, and the graph's
# stride assertion fails (op_db's conv2d through compile).
INDUCTOR_CONFIG = {
    "cuda_backend": "cpp",
    "layout_optimization": False,
    "loop_ordering_after_fusion": False,
    "loop_reindexing_after_fusion": False,
    "loop_index_inversion_in_fusion": False,
}

# When to materialise an intermediate instead of recomputing it in each consumer
# (ir.py: realize_*_threshold): Inductor has tuned values for C++ kernels, picked
# by device type, and the GPU's otherwise. With the GPU's, the tiny Llama's
# backward graph on my_asic had two more kernels than the CPU's (a rotary
# embedding's gradient fused with the value gradient, then an extra transposing
# copy per layer); with the C++ values it is the CPU's, kernel for kernel.
# (One such heuristic, realizing reused exp/log/sigmoid/tanh results, is not a
# setting and stays the GPU's.)
INDUCTOR_CONFIG_FROM_CPU = {
    "realize_opcount_threshold": "realize_cpu_opcount_threshold",
    "realize_acc_reads_threshold": "realize_cpu_acc_reads_threshold",
}


def inductor_config_patches(config) -> dict:
    """Inductor settings for a graph on host-addressable my_asic memory (``config``: torch._inductor.config).

    Settings this torch lacks are left out (2.11 has no loop_reindexing_after_fusion).
    """
    patches = {k: v for k, v in INDUCTOR_CONFIG.items() if hasattr(config, k)}
    for name, cpu_name in INDUCTOR_CONFIG_FROM_CPU.items():
        # None: Inductor picks by device type; a value the user set stays.
        if hasattr(config, cpu_name) and getattr(config, name, 0) is None:
            patches[name] = getattr(config, cpu_name)
    return patches


def my_asic_memory(gm: torch.fx.GraphModule, example_inputs):
    """None when a graph does not compute on my_asic; else "host_addressable" or "device_only"."""

    def my_asic(value):
        return isinstance(value, torch.Tensor) and value.device.type == "my_asic"

    uses = any(my_asic(t) for t in example_inputs) or any(
        my_asic(node.meta.get("val", node.meta.get("example_value")))
        for node in getattr(getattr(gm, "graph", None), "nodes", ()))
    if not uses or torch.my_asic.device_count() == 0:
        return None
    return "host_addressable" if torch.my_asic.get_device_properties(0).host_addressable else "device_only"


def compile_path() -> str:
    """How torch.compile's default backend compiles my_asic graphs in this process.

    Asking initialises the device runtime (its memory mode decides).
    """
    if torch.my_asic.device_count() == 0:
        return "unavailable: no my_asic device (the runtime could not be loaded)"
    if torch.my_asic.get_device_properties(0).host_addressable:
        return "inductor: C++ kernels on host-addressable device memory, extern calls through the dispatcher"
    return "my_asic backend: AOT autograd graphs through the dispatcher (device memory is not host addressable)"


def notice_once() -> None:
    global _noticed
    if not _noticed:
        _noticed = True
        logger.warning("torch.compile: my_asic memory is not host addressable here, so the graph runs "
                       "with the 'my_asic' backend (AOT autograd through the device's kernels), not Inductor.")
