"""Issue 18's models train on the OpenCL runtime with no CPU fallback at all.

A Hugging Face tiny Llama (random weights), the conformance kit's small CNN and an
MLP with cross-entropy: 20 AdamW steps each on my_asic (OpenCL: PoCL in CI, a GPU
where present) from the CPU's initial weights and data. Every step's loss equals
the CPU's within float32 tolerance, and ``fallback_stats()`` stays empty, so
forward, backward and the optimizer ran on the runtime's own kernels.
"""

import json
import textwrap

import pytest

from opencl_process import run_on_opencl

SCRIPT = """
    import copy, json
    import torch, torch.nn as nn
    import kernel_pytorch
    from kernel_pytorch.asic.conformance.training import _cnn

    def hf_llama():
        from transformers import LlamaConfig, LlamaForCausalLM
        config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        return LlamaForCausalLM(config)

    g = torch.Generator().manual_seed(1)
    MODELS = {
        "mlp": (lambda: nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10)),
                (torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g))),
        "cnn": (_cnn, (torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 10, (8,), generator=g))),
        "hf_llama": (hf_llama, (torch.randint(0, 128, (2, 16), generator=g), None)),
    }

    def losses(name, model, batch, device, steps=20):
        model = model.to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = (None if t is None else t.to(device) for t in batch)
        out = []
        for _ in range(steps):
            opt.zero_grad()
            if name == "hf_llama":
                loss = model(input_ids=x, labels=x).loss
            else:
                loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    torch.set_num_threads(1)  # the CPU sums in one order
    result = {}
    for name in NAMES:
        make, batch = MODELS[name]
        torch.manual_seed(0)
        reference = make()
        cpu = losses(name, copy.deepcopy(reference), batch, "cpu")
        torch.my_asic.reset_fallback_stats()
        dev = losses(name, copy.deepcopy(reference), batch, "my_asic")
        result[name] = {"cpu": cpu, "device": dev, "fallback": torch.my_asic.fallback_stats()}
    print(json.dumps(result))
"""


def _train(name):
    out = run_on_opencl(f"NAMES = [{name!r}]\n" + textwrap.dedent(SCRIPT))
    return json.loads(out.strip().splitlines()[-1])[name]


@pytest.mark.parametrize("name", ["mlp", "cnn", "hf_llama"])
def test_trains_20_adamw_steps_like_the_cpu_with_no_fallback(name):
    if name == "hf_llama":
        pytest.importorskip("transformers")
    result = _train(name)
    assert result["fallback"] == {}, f"ops that fell back to the CPU: {result['fallback']}"
    assert result["device"] == pytest.approx(result["cpu"], rel=1e-4, abs=1e-5)
