"""``kernel_pytorch.ops``: fused LLM kernels as PyTorch dispatcher operators.

Each function here calls ``torch.ops.kernel_pytorch.<name>``, so it works on
every device the package registers kernels for, under autograd,
``torch.compile(fullgraph=True)`` and ``torch.export``:

* **cpu**: the torch-free kernel library (``csrc/kernels``), vectorised for
  the best ISA level of the CPU (AVX-512, AVX2 or generic; ``KP_CPU_ISA`` or
  :func:`set_cpu_isa` forces one) and threaded with torch's intra-op pool.
  float64 runs ATen reference arithmetic in double precision.
* **my_asic**: the device runtime's own kernels (``kpdrGetKernels`` in
  ``csrc/runtime/kpdr.h``), enqueued on the current stream; kernels a runtime
  lacks run through the CPU fallback (counted by ``torch.my_asic.fallback_stats()``).
* **cuda** (when the package was built with nvcc against a CUDA torch): the
  CUDA kernel library (``csrc/kernels/cuda``), launched on the current stream
  without synchronising the host, so the ops work inside CUDA graphs;
  ``prefill_attention`` calls PyTorch's ``scaled_dot_product_attention``
  (FlashAttention-2 / cuDNN). Launch configurations are tuned once per
  (op, dtype, shape bucket, GPU) and cached on disk: see :func:`tuning_report`.

Dtypes: float32, bfloat16, float16 (arithmetic accumulates in float32).
Matrix-matrix products are not here on purpose: ``torch.matmul`` already
calls the vendor BLAS (oneDNN/MKL on CPU, cuBLAS on CUDA), which a
hand-written GEMM would not beat.
"""

from typing import Dict, List, Optional, Tuple, Union

import torch

import kernel_pytorch  # noqa: F401  (loads the extension, which defines the ops)
from kernel_pytorch import _C
from kernel_pytorch.ops import _registrations  # noqa: F401  (fake kernels, autograd)
from kernel_pytorch.ops.modules import LlamaDecoderLayer, RMSNorm, RotaryEmbedding, SwiGLUMLP, TinyLlama  # noqa: F401

__all__ = [
    "rms_norm", "fused_add_rms_norm", "silu", "silu_and_mul", "apply_rope", "softmax",
    "decode_attention", "prefill_attention", "matmul_vec", "backend_info", "cpu_isa",
    "set_cpu_isa", "tuning_report", "tuning_entries", "RMSNorm", "SwiGLUMLP", "RotaryEmbedding", "LlamaDecoderLayer", "TinyLlama",
]

_ops = torch.ops.kernel_pytorch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x * rsqrt(mean(x**2, -1) + eps) * weight`` over the last dimension."""
    return _ops.rms_norm(x, weight, eps)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> Tuple[torch.Tensor, torch.Tensor]:
    """One pass of a decoder block's residual stream.

    Returns ``(rms_norm(x + residual, weight, eps), x + residual)``; the sum is
    rounded to the input dtype before it is normalised, as the unfused code does.
    """
    return _ops.fused_add_rms_norm(x, residual, weight, eps)


def silu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(x)``, elementwise."""
    return _ops.silu(x)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """SwiGLU: ``silu(x[..., :d]) * x[..., d:]`` for a last dimension of ``2 * d``."""
    return _ops.silu_and_mul(x)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Rotary position embedding of ``x [batch, seq, heads, head_dim]``.

    ``cos`` and ``sin`` are ``[seq, head_dim // 2]`` (shared by the batch) or
    ``[batch, seq, head_dim // 2]`` (per-sequence positions).
    ``interleaved=False`` rotates the halves ``(x[i], x[i + d/2])`` (Llama,
    GPT-NeoX); ``True`` rotates adjacent pairs ``(x[2i], x[2i+1])`` (GPT-J).
    """
    return _ops.apply_rope(x, cos, sin, interleaved)


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``dim`` (equal to ``torch.softmax``)."""
    return _ops.softmax(x, dim)


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    lengths: Optional[torch.Tensor] = None,
    scale: Optional[float] = None,
) -> torch.Tensor:
    """Attention of one new token per sequence over its KV cache.

    ``q [B, H, D]``, caches ``[B, Hkv, T, D]`` (H a multiple of Hkv: query head
    ``h`` reads kv head ``h // (H // Hkv)``), ``lengths [B]`` the valid cache
    length of each sequence (1..T; all T when None), ``scale`` defaulting to
    ``1 / sqrt(D)``. Returns ``[B, H, D]``. Scores, softmax and the weighted sum
    of values are fused: each cached key and value is read once per kv head.
    """
    return _ops.decode_attention(q, k_cache, v_cache, lengths, scale)


def prefill_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True, scale: Optional[float] = None
) -> torch.Tensor:
    """Attention over a whole sequence: ``q [B, H, T, D]``, ``k, v [B, Hkv, S, D]``.

    Tiled with an online softmax, so the ``T x S`` score matrix never exists.
    With ``causal``, query ``i`` sees keys ``j <= i + (S - T)`` (bottom-right
    aligned, as a chunk of a longer sequence; equal to ``is_causal=True`` of
    ``scaled_dot_product_attention`` when ``S == T``).
    """
    return _ops.prefill_attention(q, k, v, causal, scale)


def matmul_vec(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``w [N, K] @ x [K] -> [N]``: the decode-time linear layer (memory bound)."""
    return _ops.matmul_vec(w, x)


def cpu_isa() -> str:
    """The ISA level the CPU kernels run at now: ``"avx512"``, ``"avx2"`` or ``"generic"``."""
    return _C._kp_cpu_isa()


def set_cpu_isa(level: str) -> None:
    """Runs the CPU kernels at ``level`` (``"generic"``, ``"avx2"``, ``"avx512"`` or ``"auto"``).

    Raises ValueError when the CPU cannot run that level. The environment
    variable ``KP_CPU_ISA`` sets the level a process starts with.
    """
    _C._kp_set_cpu_isa(level)


def _my_asic_info() -> str:
    my_asic = getattr(torch, "my_asic", None)
    if my_asic is None:
        return "not registered (another accelerator is present; see MY_ASIC_ENABLE)"
    if not my_asic.is_available():
        return "no device"
    my_asic.init()
    names = set(_C._runtime_kernel_names())
    needed = {"rms_norm", "silu", "rope", "softmax", "decode_attention", "prefill_attention", "matmul_vec"}
    if names >= needed:
        return "runtime kernels"
    if not names:
        return "cpu fallback (the runtime has no kernels)"
    return "runtime kernels, cpu fallback for " + ", ".join(sorted(needed - names))


def tuning_entries() -> List[Dict[str, Union[str, int, float]]]:
    """The CUDA launch configurations chosen so far (in this process or read from the cache file).

    One dict per (op, dtype, shape bucket, GPU): ``op``, ``dtype``, ``shape``,
    ``gpu``, ``threads``, ``split`` (the op's second launch parameter: rows per
    block, vectors per thread, rows per warp or cache splits), ``us`` (mean
    microseconds per launch when it was timed) and ``source`` (``"tuned"`` in
    this process or ``"cache file"``). Empty without CUDA kernels.
    """
    entries = getattr(_C, "_kp_tuning_entries", None)
    if entries is None:
        return []
    out = []
    for e in entries():
        op, dtype, shape, gpu = (e["key"].split("|", 3) + ["", "", ""])[:4]
        out.append({"op": op, "dtype": dtype, "shape": shape, "gpu": gpu, "threads": e["threads"],
                    "split": e["split"], "us": e["us"], "source": e["source"]})
    return out


def tuning_report() -> str:
    """A readable table of the CUDA launch-configuration tuner's choices (see :func:`tuning_entries`).

    The tuner times each kernel's candidate launch configurations once per
    (op, dtype, shape bucket, GPU name), as back-to-back launches replayed
    from a CUDA graph (``KP_TUNING_LOG=1`` prints each candidate's time), and
    keeps the fastest in a JSON file (``KP_TUNING_CACHE``, default
    ``~/.cache/kernel_pytorch/tuning.json``); ``KP_TUNING=off`` uses fixed
    defaults. Tuning never runs during CUDA graph capture.
    """
    if getattr(_C, "_kp_tuning_entries", None) is None:
        return "CUDA kernels " + backend_info()["cuda"]
    state = "on" if _C._kp_tuning_enabled() else "off (KP_TUNING=off: fixed defaults)"
    lines = [f"tuning: {state}; cache file: {_C._kp_tuning_cache_path()}"]
    entries = tuning_entries()
    if not entries:
        lines.append("no launch configuration chosen yet")
    for e in entries:
        lines.append(f"{e['op']:<20} {e['dtype']:<9} {e['shape']:<55} threads={e['threads']:<5} "
                     f"split={e['split']:<3} {e['us']:9.2f} us  ({e['source']}; {e['gpu']})")
    return "\n".join(lines)


def backend_info() -> Dict[str, str]:
    """Which implementation runs the ops on each device type.

    For example ``{"cpu": "avx512", "my_asic": "runtime kernels", "cuda": "not built: ..."}``;
    ``"my_asic_compile"`` says how torch.compile compiles my_asic graphs (Inductor's
    C++ kernels or the ``"my_asic"`` backend).
    Asking about my_asic initialises its runtime.
    """
    info = {"cpu": f"kernel library, {cpu_isa()} (best on this CPU: {_C._kp_best_cpu_isa()})"}
    info["my_asic"] = _my_asic_info()
    if hasattr(torch, "my_asic"):
        from kernel_pytorch.asic.compile_backend import compile_path

        info["my_asic_compile"] = compile_path()
    cuda = getattr(_C, "_kp_cuda_info", None)
    info["cuda"] = cuda() if cuda is not None else "not built: this package was compiled without CUDA"
    return info
