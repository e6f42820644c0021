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
    """torch.compile backend: AOT autograd graphs run through the my_asic dispatcher."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def run_through_dispatcher(graph: torch.fx.GraphModule, _inputs):
        return make_boxed_func(graph.forward)

    return aot_autograd(fw_compiler=run_through_dispatcher, bw_compiler=run_through_dispatcher)(
        gm, example_inputs, **kwargs)


def on_non_host_addressable_my_asic(gm: torch.fx.GraphModule, example_inputs) -> bool:
    """Whether a graph computes on a my_asic device whose memory the host cannot address."""

    def my_asic(value):
        return isinstance(value, torch.Tensor) and value.device.type == "my_asic"

    uses = any(my_asic(t) for t in example_inputs) or any(
        my_asic(node.meta.get("val", node.meta.get("example_value")))
        for node in getattr(getattr(gm, "graph", None), "nodes", ()))
    if not uses or torch.my_asic.device_count() == 0:
        return False
    return not torch.my_asic.get_device_properties(0).host_addressable


def notice_once() -> None:
    global _noticed
    if not _noticed:
        _noticed = True
        logger.warning("torch.compile: my_asic memory is not host addressable here, so the graph runs "
                       "with the 'my_asic' backend (AOT autograd through the device's kernels), not Inductor.")
