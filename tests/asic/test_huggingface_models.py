"""Tiny random Hugging Face models on my_asic behave as on the CPU.

GPT-2, BERT and Llama (tied input/output embeddings) after ``.to("my_asic")``:
the tie survives; logits, gradients, a training step and greedy generation equal
the CPU's (dropout off, so both devices compute the same thing). Skipped when
``transformers`` is not installed.
"""

import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("device_count")

VOCAB = 97


def gpt2():
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=64, bos_token_id=0, eos_token_id=1,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
    )
    return transformers.GPT2LMHeadModel(config), lambda m: (m.lm_head.weight, m.transformer.wte.weight)


def bert():
    config = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=VOCAB,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    return transformers.BertForMaskedLM(config), lambda m: (
        m.cls.predictions.decoder.weight, m.bert.embeddings.word_embeddings.weight)


def llama():
    config = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=1, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=64, tie_word_embeddings=True, bos_token_id=0, eos_token_id=1,
        pad_token_id=1,
    )
    return transformers.LlamaForCausalLM(config), lambda m: (m.lm_head.weight, m.model.embed_tokens.weight)


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama}


@pytest.fixture(params=sorted(MODELS))
def models(request):
    """(name, CPU model, identical model moved to my_asic, tied-weights getter)."""
    torch.manual_seed(0)
    cpu_model, tied = MODELS[request.param]()
    cpu_model.eval()
    dev_model = copy.deepcopy(cpu_model).to("my_asic")
    return request.param, cpu_model, dev_model, tied


def tokens():
    return torch.randint(2, VOCAB, (2, 9), generator=torch.Generator().manual_seed(1))


def test_tied_embeddings_stay_tied(models):
    _, cpu_model, dev_model, tied = models
    out_weight, in_weight = tied(dev_model)
    assert tied(cpu_model)[0] is tied(cpu_model)[1]
    assert out_weight is in_weight
    assert out_weight.device.type == "my_asic"


def test_logits_match_cpu(models):
    _, cpu_model, dev_model, _ = models
    ids = tokens()
    with torch.no_grad():
        expected = cpu_model(ids).logits
        got = dev_model(ids.to("my_asic")).logits
    assert got.device.type == "my_asic"
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-5)


def training_step(model, device, optimizer):
    model.train()
    ids = tokens().to(device)
    model(ids, labels=ids).loss.backward()
    optimizer(model.parameters()).step()


def test_gradients_match_cpu(models):
    _, cpu_model, dev_model, _ = models
    for model, device in ((cpu_model, "cpu"), (dev_model, "my_asic")):
        model.train()
        ids = tokens().to(device)
        model(ids, labels=ids).loss.backward()
    for (name, a), b in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert b.grad.device.type == "my_asic"
        torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_sgd_training_step_matches_cpu(models):
    _, cpu_model, dev_model, tied = models
    for model, device in ((cpu_model, "cpu"), (dev_model, "my_asic")):
        training_step(model, device, lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9))
    assert tied(dev_model)[0] is tied(dev_model)[1]
    for (name, a), b in zip(cpu_model.named_parameters(), dev_model.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-4, atol=1e-6, msg=name)


def test_adamw_training_step_matches_cpu_where_gradients_are_not_noise(models):
    """AdamW moves every weight by about lr whatever its gradient's size, so a
    gradient that is zero in exact arithmetic (GPT-2's query bias) moves by
    ±lr at the whim of 1e-12 rounding, on any two devices. Elsewhere the step
    must match; an untied weight would differ by up to 2·lr."""
    _, cpu_model, dev_model, tied = models
    ids = tokens()
    cpu_model.train()
    cpu_model(ids, labels=ids).loss.backward()
    meaningful = [p.grad.abs() > 1e-6 for p in cpu_model.parameters()]
    cpu_model.zero_grad()
    lr = 1e-2
    for model, device in ((cpu_model, "cpu"), (dev_model, "my_asic")):
        training_step(model, device, lambda params: torch.optim.AdamW(params, lr=lr))
    assert tied(dev_model)[0] is tied(dev_model)[1]
    for (name, a), b, mask in zip(cpu_model.named_parameters(), dev_model.parameters(), meaningful):
        torch.testing.assert_close(b.detach().cpu()[mask], a.detach()[mask], rtol=0, atol=lr / 10, msg=name)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_generation_matches_cpu(name):
    torch.manual_seed(0)
    cpu_model, _ = MODELS[name]()
    cpu_model.eval()
    dev_model = copy.deepcopy(cpu_model).to("my_asic")
    ids = tokens()[:1]
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=1)
    expected = cpu_model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    got = dev_model.generate(ids.to("my_asic"), attention_mask=torch.ones_like(ids).to("my_asic"), **kwargs)
    assert got.device.type == "my_asic"
    assert torch.equal(got.cpu(), expected)
