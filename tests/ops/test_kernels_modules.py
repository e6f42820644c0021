"""The drop-in modules: the fused path equals the plain-PyTorch path of the same weights."""

import copy

import pytest
import torch

import kernel_pytorch.ops as kops
from kernel_cases import ref_apply_rope, ref_rms_norm

VOCAB, PROMPT, NEW_TOKENS = 64, 7, 4


def tiny_model(**kwargs):
    torch.manual_seed(0)
    config = dict(vocab_size=VOCAB, hidden_size=64, num_layers=2, num_heads=8, num_kv_heads=2,
                  intermediate_size=88, max_positions=32)
    config.update(kwargs)
    return kops.TinyLlama(**config).eval()


def generate_logits(model, prompt, steps):
    """Prefill logits, then greedy decode logits of ``steps`` tokens (with a KV cache)."""
    cache = model.new_cache(prompt.shape[0], 32)
    logits = [model(prompt, cache)]
    token = logits[-1][:, -1:].argmax(-1)
    for _ in range(steps):
        logits.append(model(token, cache))
        token = logits[-1][:, -1:].argmax(-1)
    return logits


def assert_paths_agree(device, dtype, atol, rtol):
    fused = tiny_model().to(device=device, dtype=dtype)
    plain = copy.deepcopy(fused).set_use_kernels(False)
    prompt = torch.randint(0, VOCAB, (2, PROMPT), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        # The plain path decodes the fused path's tokens, so a near-tie cannot make them diverge.
        got = generate_logits(fused, prompt, NEW_TOKENS)
        cache = plain.new_cache(2, 32)
        expected = [plain(prompt, cache)]
        for step in got[:-1]:
            expected.append(plain(step[:, -1:].argmax(-1), cache))
    for i, (a, b) in enumerate(zip(got, expected)):
        assert a.device.type == torch.device(device).type
        torch.testing.assert_close(a.float().cpu(), b.float().cpu(), atol=atol, rtol=rtol,
                                   msg=lambda m: f"{'prefill' if i == 0 else f'decode step {i}'}: {m}")


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-4), (torch.bfloat16, 6e-2)], ids=["float32", "bfloat16"])
def test_tiny_llama_prefill_and_decode_logits_match_plain_pytorch_on_cpu(dtype, atol):
    assert_paths_agree("cpu", dtype, atol, atol)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 1e-4), (torch.bfloat16, 6e-2)], ids=["float32", "bfloat16"])
def test_tiny_llama_prefill_and_decode_logits_match_plain_pytorch_on_my_asic(dtype, atol, my_asic):
    assert_paths_agree(my_asic, dtype, atol, atol)


def test_tiny_llama_on_my_asic_equals_cpu(my_asic):
    model = tiny_model()
    prompt = torch.randint(0, VOCAB, (1, PROMPT))
    with torch.no_grad():
        cpu = generate_logits(model, prompt, NEW_TOKENS)
        dev = generate_logits(copy.deepcopy(model).to(my_asic), prompt.to(my_asic), NEW_TOKENS)
    for a, b in zip(dev, cpu):
        torch.testing.assert_close(a.cpu(), b, atol=1e-4, rtol=1e-4)


def test_tiny_llama_on_my_asic_runs_no_kernel_pytorch_op_through_the_fallback(my_asic, fallback_counts):
    model = tiny_model().to(my_asic)
    with torch.no_grad():
        generate_logits(model, torch.randint(0, VOCAB, (1, PROMPT)).to(my_asic), NEW_TOKENS)
    torch.my_asic.synchronize()
    ours = {k: v for k, v in fallback_counts().items() if k.startswith("kernel_pytorch::")}
    assert ours == {}


def _training_grads(model, tokens):
    model.zero_grad()
    logits = model(tokens[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).float(), tokens[:, 1:].reshape(-1))
    loss.backward()
    return loss.detach(), {n: p.grad.detach().cpu() for n, p in model.named_parameters()}


@pytest.mark.parametrize("device", ["cpu", "my_asic"])
def test_one_training_step_gives_the_same_gradients_as_plain_pytorch(device, request):
    if device == "my_asic":
        device = request.getfixturevalue("my_asic")
    fused = tiny_model().train().to(device)
    plain = copy.deepcopy(fused).set_use_kernels(False)
    tokens = torch.randint(0, VOCAB, (2, 9), generator=torch.Generator().manual_seed(3)).to(device)
    loss_a, grads_a = _training_grads(fused, tokens)
    loss_b, grads_b = _training_grads(plain, tokens)
    torch.testing.assert_close(loss_a.cpu(), loss_b.cpu(), atol=1e-5, rtol=1e-5)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], atol=1e-5, rtol=1e-4, msg=lambda m: f"{name}: {m}")


def test_rms_norm_module_equals_the_reference():
    norm = kops.RMSNorm(40, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(40))
    x = torch.randn(3, 40)
    torch.testing.assert_close(norm(x), ref_rms_norm(x, norm.weight.detach(), 1e-5), atol=2e-5, rtol=2e-5)


def test_rms_norm_module_with_residual_returns_the_sum():
    norm = kops.RMSNorm(16)
    x, r = torch.randn(2, 16), torch.randn(2, 16)
    out, s = norm(x, r)
    torch.testing.assert_close(s, x + r)
    torch.testing.assert_close(out, ref_rms_norm(x + r, norm.weight.detach()), atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("interleaved", [False, True], ids=["halves", "interleaved"])
def test_rotary_embedding_with_per_sequence_positions(interleaved):
    rope = kops.RotaryEmbedding(16, max_positions=64, interleaved=interleaved)
    x = torch.randn(2, 3, 4, 16)
    positions = torch.tensor([[0, 1, 2], [10, 11, 12]])
    expected = ref_apply_rope(x, rope.cos[positions], rope.sin[positions], interleaved)
    torch.testing.assert_close(rope(x, positions), expected, atol=2e-5, rtol=2e-5)
    plain = kops.RotaryEmbedding(16, max_positions=64, interleaved=interleaved, use_kernels=False)
    torch.testing.assert_close(plain(x, positions), expected, atol=2e-5, rtol=2e-5)


def test_swiglu_mlp_paths_agree():
    mlp = kops.SwiGLUMLP(24, 40)
    x = torch.randn(2, 5, 24)
    fused = mlp(x)
    mlp.use_kernels = False
    torch.testing.assert_close(fused, mlp(x), atol=1e-5, rtol=1e-5)


def test_attention_heads_must_divide():
    with pytest.raises(ValueError, match="num_heads"):
        kops.LlamaDecoderLayer(64, 6, 4, 88)
