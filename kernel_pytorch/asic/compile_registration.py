"""Lazy torch.compile registration for my_asic.

``import kernel_pytorch`` must not import torch._dynamo or torch._inductor
(seconds of imports nobody asked for). Instead, a finder on sys.meta_path
waits for torch to import them and then registers, right after the module
has executed:

* torch._dynamo.device_interface: my_asic's DeviceInterface (dynamo_interface.py);
* torch._dynamo.backends.registry: the ``"my_asic"`` backend (compile_backend.py);
* torch._inductor.compile_fx: graphs on a my_asic runtime without
  host-addressable memory go to the ``"my_asic"`` backend instead of Inductor;
  graphs on host-addressable my_asic memory get compile_backend's Inductor
  settings, and my_asic's scheduling and wrapper codegen are registered with
  Inductor together with inductor_config.py, which Inductor's cache keys then
  include (inductor.register()).

If torch already imported one of them, its registration runs at once.

Inductor would also find the scheduling and wrapper codegen for my_asic itself,
the way PyTorch looks them up for PrivateUse1 devices: as attributes of
torch.my_asic (``Scheduling``, ``PythonWrapperCodegen``, ...; kernel_pytorch.asic
resolves them lazily from inductor.py), but without a device config.
"""

import importlib.abc
import importlib.util
import sys


def _device_interface(module) -> None:
    from kernel_pytorch.asic.dynamo_interface import MyAsicInterface

    module.register_interface_for_device("my_asic", MyAsicInterface)


def _backend_registry(module) -> None:
    from kernel_pytorch.asic.compile_backend import my_asic_backend

    if "my_asic" not in module._COMPILER_FNS:
        module.register_backend(compiler_fn=my_asic_backend, name="my_asic")


def _compile_fx(module) -> None:
    original = module.compile_fx
    if getattr(original, "_my_asic_redirect", False):
        return

    def compile_fx(model, example_inputs, *args, **kwargs):
        from kernel_pytorch.asic import compile_backend

        where = compile_backend.my_asic_memory(model, example_inputs)
        if where == "device_only":
            compile_backend.notice_once()
            return compile_backend.my_asic_backend(model, example_inputs)
        if where != "host_addressable":
            return original(model, example_inputs, *args, **kwargs)
        from kernel_pytorch import _C
        from kernel_pytorch.asic import inductor, inductor_config

        # Before Inductor computes its cache keys: they include inductor_config.
        inductor.register()
        patches = compile_backend.inductor_config_patches(module.config)
        if any(getattr(module.config, k) != v for k, v in patches.items()):
            # compile_fx applies its patches, then calls itself without them: patch once
            kwargs["config_patches"] = {**patches, **(kwargs.get("config_patches") or {})}
        # Attention traced into this graph runs as its C++ kernels do: on this
        # thread's intra-op threads (csrc/aten/aten.h, prefer_host_flash_attention).
        previous = _C._set_prefer_host_flash_attention(inductor_config.host_flash_attention)
        try:
            return original(model, example_inputs, *args, **kwargs)
        finally:
            _C._set_prefer_host_flash_attention(previous)

    compile_fx._my_asic_redirect = True
    compile_fx.__wrapped__ = original
    compile_fx.__doc__ = original.__doc__
    module.compile_fx = compile_fx


_HOOKS = {
    "torch._dynamo.device_interface": _device_interface,
    "torch._dynamo.backends.registry": _backend_registry,
    "torch._inductor.compile_fx": _compile_fx,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, hook):
        self.loader, self.hook = loader, hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.hook(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Wraps the loaders of the modules in _HOOKS so their hook runs after them."""

    def find_spec(self, fullname, path, target=None):
        hook = _HOOKS.get(fullname)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, hook)
                return spec
        return None


_installed = False


def install() -> None:
    """Registers now for modules torch already imported, lazily for the others (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    sys.meta_path.insert(0, _Finder())
    for name, hook in _HOOKS.items():
        module = sys.modules.get(name)
        if module is not None:
            hook(module)
