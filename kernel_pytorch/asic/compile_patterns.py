"""Graph passes of the ``"my_asic"`` compile backend: hand-written layers become kernel_pytorch.ops.

Models write RMSNorm out by hand (Hugging Face's LlamaRMSNorm / Qwen2RMSNorm:
upcast, ``pow(2).mean(-1)``, ``rsqrt``, scale, downcast, weight). Eagerly that is
six device ops; compiled for a runtime without host-addressable memory, the
AOT graph keeps them as six. These passes find the pattern in the graphs the
backend receives and call ``kernel_pytorch.rms_norm`` instead (the runtime's
kernel-table entry, or its CPU kernel): in the inference graph, and in the joint
forward/backward graph before it is split, so training uses the op's own
backward too.

Patterns are traced lazily, at the first compile, with Inductor's pattern
matcher (``register_replacement``), without decompositions: the graphs AOT
autograd gives the backend are not decomposed either. Softmax and
scaled_dot_product_attention need no pattern: their ATen ops already run the
runtime's kernels on my_asic. SwiGLU (``silu(gate) * up``) and RoPE
(``rotate_half``) are not rewritten: ``silu_and_mul`` wants gate and up in one
tensor (a concatenation would cost more than it saves) and ``apply_rope``
assumes cos/sin halves that a graph cannot prove equal.
"""

import collections
import functools

import torch

_passes = None
# Replacements made in this process, by pattern name (what tests and users can check).
replacements = collections.Counter()


def _rms_norm_search(x, weight, eps):
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + eps)
    return weight * hidden.to(x.dtype)


def _rms_norm_replacement(x, weight, eps):
    return torch.ops.kernel_pytorch.rms_norm(x, weight, eps)


def _rms_norm_applies(match) -> bool:
    # kernel_pytorch.rms_norm scales by a weight of x's dtype over the last dimension.
    x, weight = match.kwargs["x"].meta["val"], match.kwargs["weight"].meta["val"]
    return x.dtype == weight.dtype and weight.dim() == 1 and x.shape[-1] == weight.shape[0]


def supported() -> bool:
    """Whether this torch's pattern matcher can trace patterns without decompositions.

    torch 2.11's ``register_replacement`` has no ``get_decomp_fn`` (it traces the
    replacement with Inductor's decompositions), so the rewrite is off there.
    """
    import inspect

    from torch._inductor.pattern_matcher import fwd_only, register_replacement

    return all("get_decomp_fn" in inspect.signature(f).parameters for f in (register_replacement, fwd_only))


def passes():
    """(inference pass, joint forward/backward pass), built at the first call; None where not supported()."""
    global _passes
    if _passes is None:
        if not supported():
            _passes = ()
            return None
        import kernel_pytorch.ops  # noqa: F401  (fake implementations of the replacements)
        from torch._inductor.pattern_matcher import (
            PatternMatcherPass, fwd_only, joint_fwd_bwd, register_replacement)

        no_decompositions = dict
        inference = PatternMatcherPass(pass_name="my_asic_inference_patterns")
        joint = PatternMatcherPass(pass_name="my_asic_joint_patterns")
        # One trace per dtype: the upcast and downcast are graph nodes only off float32.
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for trace, target, grad in ((fwd_only, inference, False), (joint_fwd_bwd, joint, True)):
                example = [torch.empty(2, 8, 16, dtype=dtype, requires_grad=grad),
                           torch.empty(16, dtype=dtype, requires_grad=grad)]
                register_replacement(
                    _rms_norm_search, _rms_norm_replacement, example,
                    functools.partial(trace, get_decomp_fn=no_decompositions), target,
                    extra_check=_rms_norm_applies, scalar_workaround={"eps": 1e-6},
                    get_decomp_fn=no_decompositions, pattern_name="rms_norm")
        _passes = (inference, joint)
    return _passes or None


def _apply(pattern_pass, gm: torch.fx.GraphModule) -> int:
    from torch._inductor.pattern_matcher import stable_topological_sort

    if pattern_pass is None:
        return 0

    count = pattern_pass.apply(gm.graph)
    if count:
        # A joint replacement's backward node lands where the forward pattern
        # was, before the gradient it reads: restore the order.
        stable_topological_sort(gm.graph)
        gm.graph.lint()
        gm.recompile()
        replacements["rms_norm"] += count
    return count


def rewrite_inference_graph(gm: torch.fx.GraphModule) -> int:
    """Replaces the patterns in a forward-only graph; returns how many."""
    return _apply((passes() or (None, None))[0], gm)


def rewrite_joint_graph(gm: torch.fx.GraphModule) -> int:
    """Replaces the patterns in a joint forward/backward graph (before the partition)."""
    return _apply((passes() or (None, None))[1], gm)
