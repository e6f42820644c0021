"""TorchInductor for my_asic on runtimes whose device memory is host addressable.

Imported lazily (kernel_pytorch/asic/compile_registration.py), when torch.compile
first needs it; never at ``import kernel_pytorch``.

Inductor generates C++ (OpenMP) kernels for my_asic graphs with its CPU
scheduling: the simulator's device pointers are host pointers, so the
kernels read and write the tensors in place. Extern calls (matmul,
convolution, SDPA, ``kernel_pytorch.ops``) stay the my_asic dispatcher's.

Stream order: a generated kernel runs on the host thread, as my_asic's native
host kernels do (csrc/aten/native/host_kernels.h), so before each one the
wrapper waits for the work queued on the device's current stream; work
queued later sees its results because it ran to completion first.
"""

import torch
from torch._inductor.codegen.common import DeviceOpOverrides, get_device_op_overrides, register_device_op_overrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen  # also torch.my_asic.WrapperFxCodegen

DEVICE = "my_asic"
# What the wrapper calls before each C++ kernel: waits for the device's current
# stream (an atomic compare when it is idle, no Python stream object).
WAIT_STREAM = "my_asic_wait_current_stream"


def host_addressable() -> bool:
    """Whether the runtime's device pointers are host pointers (device 0 answers for all)."""
    return torch.my_asic.device_count() > 0 and torch.my_asic.get_device_properties(0).host_addressable


class MyAsicDeviceOpOverrides(DeviceOpOverrides):
    """Code snippets Inductor's Python wrapper emits for my_asic."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from kernel_pytorch.asic.inductor import get_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.my_asic.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.my_asic.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.my_asic.device({device_idx})"

    def cpp_kernel_type(self) -> str:
        return "void*"


def get_raw_stream(device_idx: int) -> int:
    """The current stream's id on ``device_idx`` (my_asic streams are named by id)."""
    return torch.my_asic.current_stream(device_idx).stream_id


class MyAsicScheduling(CppScheduling):
    """Inductor's C++ kernels, on my_asic memory (host addressable)."""

    def __init__(self, scheduler):
        if not host_addressable():
            raise RuntimeError(
                "Inductor's C++ kernels need host-addressable my_asic memory; this runtime's is not "
                "(MY_ASIC_HOST_ADDRESSABLE=0 or a real device). torch.compile picks the 'my_asic' "
                "backend for such runtimes: use torch.compile(model) or backend='my_asic'.")
        super().__init__(scheduler)


class MyAsicWrapperCodegen(PythonWrapperCodegen):
    """The Python wrapper: C++ kernels called like the CPU's, after a stream wait."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            from torch._inductor.codegen.wrapper import SubgraphPythonWrapperCodegen

            return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return MyAsicWrapperCodegen()

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        from torch._inductor.virtualized import V

        device = device or V.graph.get_current_device_or_throw()
        if device.type == DEVICE and not triton:
            self.add_import_once(f"from kernel_pytorch._C import _wait_current_stream as {WAIT_STREAM}")
            self.writeline(f"{WAIT_STREAM}({device.index or 0})")
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


class MyAsicCppWrapperCodegen(CppWrapperCpu):
    """``cpp_wrapper=True`` is not supported for my_asic: says so instead of emitting wrong code."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        raise NotImplementedError(
            "torch.compile for my_asic generates a Python wrapper only; turn off "
            "torch._inductor.config.cpp_wrapper (and AOTInductor) for my_asic graphs.")


def register() -> None:
    """Registers my_asic's scheduling and wrappers with Inductor, with inductor_config as its device config.

    Inductor includes each device's config in its FX-graph and AOT-autograd cache
    keys (torch/_inductor/codecache.py, FxGraphHashDetails), so a cached graph is
    only reused under the same my_asic settings (inductor_config.py). Idempotent;
    called before each my_asic graph compiles. Torch without device configs
    (``device_custom_config``) gets the codegen alone.
    """
    global _registered
    if _registered:
        return
    import inspect

    from torch._inductor.codegen.common import init_backend_registration, register_backend_for_device

    from kernel_pytorch.asic import inductor_config

    # Inductor's own devices first: it registers them only while it has no entry for "cpu".
    init_backend_registration()
    parameters = inspect.signature(register_backend_for_device).parameters
    optional = {"device_fx_wrapper_codegen": WrapperFxCodegen, "device_custom_config": inductor_config}
    register_backend_for_device(DEVICE, MyAsicScheduling, MyAsicWrapperCodegen, MyAsicCppWrapperCodegen,
                                **{k: v for k, v in optional.items() if k in parameters})
    _registered = True


_registered = False

# Inductor's built-in overrides (cuda, xpu, ...) first: torch < 2.13 loads them only
# while its table is empty, so registering ours first left CUDA graphs with none
# (their wrapper then read `with pass:`).
get_device_op_overrides("cuda")
register_device_op_overrides(DEVICE, MyAsicDeviceOpOverrides())
