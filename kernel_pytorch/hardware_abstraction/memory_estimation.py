"""Memory needed to serve a decoder-only transformer for inference.

``estimate_inference_memory`` answers "will this model fit on that device?"
before any weights are loaded, so a script can pick a device (or fail with the
shortfall) up front instead of hitting an out-of-memory error mid-load.

The estimate covers a Llama-style decoder: token embedding, ``layers`` blocks of
grouped-query attention plus a gated MLP, RMSNorm weights, a final norm and an
LM head. Formula (``head_dim = hidden / heads``):

weights (parameters x ``bytes_per_param``)
    embedding      ``vocab * hidden``
    per layer      q and o projections ``2 * hidden * hidden``
                   k and v projections ``2 * hidden * kv_heads * head_dim``
                   MLP ``3 * hidden * intermediate`` for a gated MLP (gate, up
                   and down projections, as in Llama/Mistral/Qwen);
                   ``2 * hidden * intermediate`` with ``gated_mlp=False``
                   two norms ``2 * hidden``
    final norm     ``hidden``
    LM head        ``vocab * hidden`` (0 with ``tie_word_embeddings=True``)
    Biases are not counted (Llama-style projections have none).

KV cache
    ``2 (k and v) * layers * kv_heads * head_dim * max_seq_len * batch_size
    * kv_bytes_per_element``

activations (peak working set of one forward pass over ``max_seq_len`` tokens)
    Inference frees each layer's activations before the next layer runs, so
    the peak is one layer's live tensors, per token:
    ``2 * hidden`` (residual stream and its normalised copy)
    ``+ max(hidden + 2 * kv_heads * head_dim, mlp_width)`` (the larger of the
    attention projections and the MLP intermediates, ``mlp_width`` being
    ``2 * intermediate`` for gated MLPs, ``intermediate`` otherwise)
    ``+ heads * max_seq_len`` (eager attention's score matrix; fused/flash
    attention needs less, so this errs towards over-estimating)
    ``+ vocab`` (logits for every position, as a prefill computes them)
    times ``batch_size * max_seq_len * activation_bytes_per_element``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

from .hal_core import BYTES_PER_GIB

__all__ = ["InferenceMemoryEstimate", "estimate_inference_memory"]


@dataclass(frozen=True)
class InferenceMemoryEstimate:
    """Bytes needed to run a model for inference, split by what holds them.

    All ``*_bytes`` fields are in bytes; :meth:`breakdown` and ``str()`` add
    GiB (2**30 bytes) figures for people.
    """

    parameter_count: int
    weights_bytes: int
    kv_cache_bytes: int
    activations_bytes: int

    @property
    def total_bytes(self) -> int:
        """Weights + KV cache + activations, in bytes."""
        return self.weights_bytes + self.kv_cache_bytes + self.activations_bytes

    @property
    def total_gib(self) -> float:
        """:attr:`total_bytes` in GiB (2**30 bytes)."""
        return self.total_bytes / BYTES_PER_GIB

    def breakdown(self) -> Dict[str, int]:
        """Bytes per component plus the total, e.g. for JSON output."""
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "activations_bytes": self.activations_bytes,
            "total_bytes": self.total_bytes,
        }

    def __str__(self) -> str:
        rows = [
            ("weights", self.weights_bytes),
            ("kv cache", self.kv_cache_bytes),
            ("activations", self.activations_bytes),
            ("total", self.total_bytes),
        ]
        lines = [f"parameters: {self.parameter_count:,} ({self.parameter_count / 1e9:.2f} B)"]
        lines += [f"{label:<12}{value / BYTES_PER_GIB:10.2f} GiB  ({value:,} bytes)" for label, value in rows]
        return "\n".join(lines)


def _require_positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _require_positive_number(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of bytes, got {value!r}")


def estimate_inference_memory(
    hidden: int,
    intermediate: int,
    layers: int,
    vocab: int,
    heads: int,
    kv_heads: Optional[int] = None,
    max_seq_len: int = 2048,
    bytes_per_param: float = 2,
    *,
    batch_size: int = 1,
    gated_mlp: bool = True,
    tie_word_embeddings: bool = False,
    kv_bytes_per_element: Optional[float] = None,
    activation_bytes_per_element: Optional[float] = None,
) -> InferenceMemoryEstimate:
    """Estimate the memory to serve a Llama-style decoder (formula in the module docstring).

    Args:
        hidden: model width (``hidden_size``).
        intermediate: MLP width (``intermediate_size``).
        layers: number of decoder blocks.
        vocab: vocabulary size.
        heads: attention heads; must divide ``hidden``.
        kv_heads: key/value heads for grouped-query attention; defaults to
            ``heads`` (multi-head attention). Must divide ``heads``.
        max_seq_len: tokens per sequence the KV cache must hold.
        bytes_per_param: bytes per weight (2 for bf16/fp16, 1 for int8, 0.5
            for int4).
        batch_size: sequences served at once.
        gated_mlp: True for gate/up/down MLPs (Llama, Mistral, Qwen); False
            for two-matrix MLPs (GPT-2, OPT).
        tie_word_embeddings: True when the LM head reuses the embedding.
        kv_bytes_per_element: bytes per cached K/V value; defaults to
            ``bytes_per_param`` but at least 2, because quantised-weight
            models still keep a 16-bit cache unless told otherwise.
        activation_bytes_per_element: bytes per activation value; defaults to
            the same rule as ``kv_bytes_per_element``.

    Returns:
        An :class:`InferenceMemoryEstimate` (bytes).

    Raises:
        ValueError: a size is not positive, or heads do not divide evenly.
    """
    for name, value in (
        ("hidden", hidden),
        ("intermediate", intermediate),
        ("layers", layers),
        ("vocab", vocab),
        ("heads", heads),
        ("max_seq_len", max_seq_len),
        ("batch_size", batch_size),
    ):
        _require_positive_int(name, value)
    kv_heads = heads if kv_heads is None else kv_heads
    _require_positive_int("kv_heads", kv_heads)
    _require_positive_number("bytes_per_param", bytes_per_param)
    if hidden % heads:
        raise ValueError(f"heads ({heads}) must divide hidden ({hidden}) to give a whole head_dim")
    if heads % kv_heads:
        raise ValueError(
            f"kv_heads ({kv_heads}) must divide heads ({heads}) for grouped-query attention; "
            f"use kv_heads=heads for multi-head attention"
        )
    # A 16-bit floor: int8/int4 weight quantisation leaves the cache and the
    # activations in the compute dtype.
    default_element_bytes = max(bytes_per_param, 2)
    kv_bytes = default_element_bytes if kv_bytes_per_element is None else kv_bytes_per_element
    act_bytes = default_element_bytes if activation_bytes_per_element is None else activation_bytes_per_element
    _require_positive_number("kv_bytes_per_element", kv_bytes)
    _require_positive_number("activation_bytes_per_element", act_bytes)

    head_dim = hidden // heads
    kv_width = kv_heads * head_dim
    mlp_matrices = 3 if gated_mlp else 2

    attention_params = 2 * hidden * hidden + 2 * hidden * kv_width
    mlp_params = mlp_matrices * hidden * intermediate
    norm_params = 2 * hidden
    per_layer_params = attention_params + mlp_params + norm_params
    embedding_params = vocab * hidden
    lm_head_params = 0 if tie_word_embeddings else vocab * hidden
    parameter_count = embedding_params + layers * per_layer_params + hidden + lm_head_params

    kv_cache_elements = 2 * layers * kv_width * max_seq_len * batch_size

    mlp_width = 2 * intermediate if gated_mlp else intermediate
    per_token_activations = (
        2 * hidden + max(hidden + 2 * kv_width, mlp_width) + heads * max_seq_len + vocab
    )
    activation_elements = per_token_activations * max_seq_len * batch_size

    return InferenceMemoryEstimate(
        parameter_count=parameter_count,
        weights_bytes=int(round(parameter_count * bytes_per_param)),
        kv_cache_bytes=int(round(kv_cache_elements * kv_bytes)),
        activations_bytes=int(round(activation_elements * act_bytes)),
    )
