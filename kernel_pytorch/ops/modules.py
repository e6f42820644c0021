"""Drop-in ``nn.Module`` building blocks of a Llama-style decoder on kernel_pytorch.ops.

Every module takes ``use_kernels``: True runs the fused ops, False the same
arithmetic in plain PyTorch (the reference the kernels are checked against,
and what runs where the ops are not wanted). Weights and buffers are the same
either way, so one model compares both paths.
"""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

_ops = torch.ops.kernel_pytorch


class RMSNorm(nn.Module):
    """Root-mean-square layer norm over the last dimension (Llama's ``LlamaRMSNorm``).

    ``forward(x)`` returns the normalised ``x``; ``forward(x, residual)`` adds
    the residual first and returns ``(normalised, x + residual)`` in one fused
    pass (the residual stream of a decoder block).
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6, use_kernels: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps
        self.use_kernels = use_kernels

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor] = None):
        if self.use_kernels:
            if residual is None:
                return _ops.rms_norm(x, self.weight, self.eps)
            return _ops.fused_add_rms_norm(x, residual, self.weight, self.eps)
        if residual is not None:
            x = x + residual
        xf = x.float()
        out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()).to(x.dtype)
        return out if residual is None else (out, x)


class SwiGLUMLP(nn.Module):
    """Llama's MLP: ``down(silu(gate(x)) * up(x))``, gate and up as one matmul."""

    def __init__(self, hidden_size: int, intermediate_size: int, use_kernels: bool = True):
        super().__init__()
        # Rows [0, intermediate) are the gate projection, the rest the up projection.
        self.gate_up_proj = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.use_kernels = use_kernels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate_up = self.gate_up_proj(x)
        if self.use_kernels:
            return self.down_proj(_ops.silu_and_mul(gate_up))
        gate, up = gate_up.chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding with precomputed ``cos``/``sin`` tables.

    ``forward(x, positions)`` rotates ``x [batch, seq, heads, head_dim]`` at
    ``positions [seq]`` (shared) or ``[batch, seq]``.
    """

    def __init__(self, head_dim: int, max_positions: int = 2048, base: float = 10000.0,
                 interleaved: bool = False, use_kernels: bool = True):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.interleaved = interleaved
        self.use_kernels = use_kernels

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        cos, sin = self.cos[positions].to(x.dtype), self.sin[positions].to(x.dtype)
        if self.use_kernels:
            return _ops.apply_rope(x, cos, sin, self.interleaved)
        c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)  # broadcast over heads
        if self.interleaved:
            x0, x1 = x[..., 0::2], x[..., 1::2]
            return torch.stack([x0 * c - x1 * s, x1 * c + x0 * s], dim=-1).flatten(-2)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


@dataclass
class KVCache:
    """Preallocated keys and values of one layer: ``[batch, kv_heads, max_len, head_dim]``."""

    k: torch.Tensor
    v: torch.Tensor
    length: int = 0


class LlamaAttention(nn.Module):
    """Grouped-query self-attention with rotary embeddings and a KV cache."""

    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, max_positions: int,
                 use_kernels: bool = True):
        super().__init__()
        if hidden_size % num_heads or num_heads % num_kv_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must divide into num_heads ({num_heads}) heads, "
                             f"and num_heads into num_kv_heads ({num_kv_heads}) groups")
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)
        self.rotary = RotaryEmbedding(self.head_dim, max_positions, use_kernels=use_kernels)
        self.use_kernels = use_kernels

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: Optional[KVCache] = None) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.rotary(self.q_proj(x).view(b, t, self.num_heads, self.head_dim), positions)
        k = self.rotary(self.k_proj(x).view(b, t, self.num_kv_heads, self.head_dim), positions)
        v = self.v_proj(x).view(b, t, self.num_kv_heads, self.head_dim)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [b, heads, t, d]
        if cache is not None:
            start = cache.length
            cache.k[:, :, start:start + t] = k
            cache.v[:, :, start:start + t] = v
            cache.length = start + t
            k, v = cache.k[:, :, :cache.length], cache.v[:, :, :cache.length]
        if self.use_kernels:
            if t == 1:
                out = _ops.decode_attention(q[:, :, 0], k, v).unsqueeze(2)
            else:
                out = _ops.prefill_attention(q, k, v, True)
        else:
            # Bottom-right causal mask: new tokens see the whole cache before them.
            tk = k.shape[2]
            mask = torch.ones(t, tk, dtype=torch.bool, device=x.device).tril(tk - t)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class LlamaDecoderLayer(nn.Module):
    """Pre-norm decoder block: attention and SwiGLU MLP around a fused residual stream."""

    def __init__(self, hidden_size: int, num_heads: int, num_kv_heads: int, intermediate_size: int,
                 max_positions: int = 2048, eps: float = 1e-6, use_kernels: bool = True):
        super().__init__()
        self.input_norm = RMSNorm(hidden_size, eps, use_kernels)
        self.attn = LlamaAttention(hidden_size, num_heads, num_kv_heads, max_positions, use_kernels)
        self.post_attn_norm = RMSNorm(hidden_size, eps, use_kernels)
        self.mlp = SwiGLUMLP(hidden_size, intermediate_size, use_kernels)

    def forward(self, x: torch.Tensor, residual: Optional[torch.Tensor], positions: torch.Tensor,
                cache: Optional[KVCache] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns ``(mlp output, residual)``; the caller adds them (or the next norm does)."""
        if residual is None:
            residual = x
            h = self.input_norm(x)
        else:
            h, residual = self.input_norm(x, residual)
        h = self.attn(h, positions, cache)
        h, residual = self.post_attn_norm(h, residual)
        return self.mlp(h), residual


class TinyLlama(nn.Module):
    """A small Llama-style language model built from the modules above."""

    def __init__(self, vocab_size: int = 256, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                 num_kv_heads: int = 2, intermediate_size: int = 344, max_positions: int = 512,
                 use_kernels: bool = True):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(hidden_size, num_heads, num_kv_heads, intermediate_size, max_positions,
                              use_kernels=use_kernels) for _ in range(num_layers))
        self.norm = RMSNorm(hidden_size, use_kernels=use_kernels)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.max_positions = max_positions

    def set_use_kernels(self, use_kernels: bool) -> "TinyLlama":
        """Switches every block between the fused ops and plain PyTorch."""
        for m in self.modules():
            if hasattr(m, "use_kernels"):
                m.use_kernels = use_kernels
        return self

    def new_cache(self, batch: int, max_len: Optional[int] = None) -> List[KVCache]:
        """An empty KV cache per layer on the model's device and dtype."""
        p = self.lm_head.weight
        attn = self.layers[0].attn
        shape = (batch, attn.num_kv_heads, max_len or self.max_positions, attn.head_dim)
        return [KVCache(p.new_zeros(shape), p.new_zeros(shape)) for _ in self.layers]

    def forward(self, tokens: torch.Tensor, cache: Optional[List[KVCache]] = None) -> torch.Tensor:
        """Logits ``[batch, seq, vocab]`` of ``tokens [batch, seq]`` (appended to ``cache``)."""
        start = cache[0].length if cache is not None else 0
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x, residual = self.embed(tokens), None
        for i, layer in enumerate(self.layers):
            x, residual = layer(x, residual, positions, cache[i] if cache is not None else None)
        x, _ = self.norm(x, residual)
        return self.lm_head(x)
