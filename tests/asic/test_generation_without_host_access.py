"""Hugging Face generate() on device memory the host cannot address (MY_ASIC_HOST_ADDRESSABLE=0):
greedy decoding equals the CPU's, top-k and top-p sampling draw valid tokens reproducibly, and no
op of any of them falls back to the CPU (sampling needs topk, sort, cumsum, multinomial, isin and
an int64 max(), all through the runtime's entries). Skipped without ``transformers``."""

import json

import pytest

from device_subprocess import last_line, run_python

pytest.importorskip("transformers")

SCRIPT = """
import json, torch, kernel_pytorch
from transformers import LlamaConfig, LlamaForCausalLM
config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, pad_token_id=1, eos_token_id=2)
torch.manual_seed(0)
cpu = LlamaForCausalLM(config).eval()
dev = LlamaForCausalLM(config).eval()
dev.load_state_dict(cpu.state_dict())
dev = dev.to("my_asic")
ids = torch.randint(3, 128, (2, 6))
mask = torch.ones_like(ids)
out = {}
greedy = dict(max_new_tokens=8, do_sample=False)
torch.my_asic.reset_fallback_stats()
got = dev.generate(ids.to("my_asic"), attention_mask=mask.to("my_asic"), **greedy)
out["greedy_equal"] = torch.equal(got.cpu(), cpu.generate(ids, attention_mask=mask, **greedy))
for name, kwargs in (("top_k", dict(top_k=20)), ("top_p", dict(top_k=0, top_p=0.9))):
    sample = dict(max_new_tokens=8, do_sample=True, **kwargs)
    torch.manual_seed(3)
    first = dev.generate(ids.to("my_asic"), attention_mask=mask.to("my_asic"), **sample).cpu()
    torch.manual_seed(3)
    again = dev.generate(ids.to("my_asic"), attention_mask=mask.to("my_asic"), **sample).cpu()
    out[name] = {"shape": list(first.shape), "in_vocab": bool(((first >= 0) & (first < 128)).all()),
                 "prompt_kept": torch.equal(first[:, :6], ids), "reproducible": torch.equal(first, again)}
out["fallbacks"] = torch.my_asic.fallback_stats()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def generated():
    return json.loads(last_line(run_python(SCRIPT, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))


def test_greedy_generation_equals_the_cpu(generated):
    assert generated["greedy_equal"]


@pytest.mark.parametrize("name", ["top_k", "top_p"])
def test_sampling_draws_valid_tokens_reproducibly(generated, name):
    assert generated[name] == {"shape": [2, 14], "in_vocab": True, "prompt_kept": True, "reproducible": True}


def test_no_op_falls_back(generated):
    assert generated["fallbacks"] == {}
