"""Inductor settings of my_asic graphs on host-addressable memory.

Registered with Inductor as my_asic's device config (``register_backend_for_device(...,
device_custom_config=...)``, kernel_pytorch/asic/inductor.py), so its values are part of
Inductor's FX-graph and AOT-autograd cache keys: a graph compiled under one setting is
never served from the on-disk cache under another. Imported lazily, when a my_asic graph
first compiles; change a value before compiling, e.g.
``kernel_pytorch.asic.inductor_config.host_flash_attention = False``.
"""

import sys

from torch.utils._config_module import install_config_module

# Attention with more than one query (prefill, a forward without cache) traced into
# the graph takes ATen's CPU flash attention on device memory, on the calling thread's
# intra-op (OpenMP) threads like the graph's C++ kernels (docs/compile.md, "Attention
# inside Inductor graphs"). False: the runtime's prefill kernel, as in eager mode.
# Decode (one query) always keeps the runtime's split-K kernel. The choice is made
# while AOT autograd traces, before Inductor sees the graph: hence the cache key.
host_flash_attention: bool = True

# What else decides the code of a cached graph: the sources of kernel_pytorch's
# Inductor integration (its wrapper codegen, the Inductor options it patches) and the
# package version (the C++ side, e.g. which attention kernel a trace picks). Inductor's
# own key covers torch's sources only; without this, a cache filled by an older
# kernel_pytorch would serve its code to a newer one.
def _codegen_key() -> str:
    import hashlib
    import os

    import kernel_pytorch

    digest = hashlib.sha256(getattr(kernel_pytorch, "__version__", "").encode())
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("inductor.py", "inductor_config.py", "compile_backend.py", "compile_registration.py"):
        with open(os.path.join(here, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


codegen_key: str = _codegen_key()
del _codegen_key

install_config_module(sys.modules[__name__])
