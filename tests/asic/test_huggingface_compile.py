"""torch.compile of tiny random Hugging Face models on my_asic equals the CPU.

Llama, Qwen2, GPT-2 and BERT: a compiled forward and training step (loss and
every gradient) on my_asic against the same model in CPU eager, with
``backend="aot_eager"`` and with the default backend (Inductor on host
addressable memory, the ``"my_asic"`` backend otherwise), in both memory
modes; and my_asic adds no graph break to those the CPU has (transformers 5's
GPT-2 breaks on the CPU too, on a logging call). Each case runs in its own
interpreter. Inductor builds C++ on the CPU, slow on small machines: the
default backend runs Llama by default, the other models with ``-m slow``.
"""

import pytest

from device_subprocess import last_line, run_python

pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("device_count")

MODES = {"host_addressable": {"MY_ASIC_HOST_ADDRESSABLE": "1"},
         "not_host_addressable": {"MY_ASIC_HOST_ADDRESSABLE": "0"}}

MODELS = """
import torch, transformers, kernel_pytorch

def make(name):
    small = dict(vocab_size=128, max_position_embeddings=64)
    if name == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, **small))
    if name == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, **small))
    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=128, n_positions=64, n_embd=64, n_layer=2, n_head=4,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    return transformers.BertForMaskedLM(transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **small))

def graph_breaks(model, ids):
    torch._dynamo.reset()
    return torch._dynamo.explain(model)(input_ids=ids, labels=ids).graph_break_count
"""


def compiled_step(name, backend):
    return MODELS + f"""
import copy
torch.manual_seed(0)
cpu = make({name!r})
dev = copy.deepcopy(cpu).to("my_asic")
ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
expected = cpu(input_ids=ids, labels=ids).loss
expected.backward()
fullgraph = graph_breaks(cpu, ids) == 0
torch._dynamo.reset()
kwargs = {{}} if {backend!r} == "default" else {{"backend": {backend!r}}}
compiled = torch.compile(dev, fullgraph=fullgraph, **kwargs)
loss = compiled(input_ids=ids.to("my_asic"), labels=ids.to("my_asic")).loss
loss.backward()
assert loss.device.type == "my_asic"
torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-4, atol=1e-5)
for (n, a), b in zip(cpu.named_parameters(), dev.parameters()):
    torch.testing.assert_close(b.grad.cpu(), a.grad, rtol=1e-3, atol=1e-5, msg=n)
print("ok")
"""


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen2"])
def test_aot_eager_training_step_matches_cpu(name, mode):
    assert last_line(run_python(compiled_step(name, "aot_eager"), env=MODES[mode])) == "ok"


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", [
    pytest.param("bert", marks=pytest.mark.slow), pytest.param("gpt2", marks=pytest.mark.slow), "llama",
    pytest.param("qwen2", marks=pytest.mark.slow)])
def test_default_compile_training_step_matches_cpu(name, mode):
    assert last_line(run_python(compiled_step(name, "default"), env=MODES[mode])) == "ok"


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama", "qwen2"])
def test_my_asic_adds_no_graph_break(name):
    out = run_python(MODELS + f"""
torch.manual_seed(0)
model = make({name!r})
ids = torch.randint(0, 128, (2, 16))
on_cpu = graph_breaks(model, ids)
on_device = graph_breaks(model.to("my_asic"), ids.to("my_asic"))
print(on_cpu, on_device)
""")
    on_cpu, on_device = map(int, last_line(out).split())
    assert on_device == on_cpu


def test_inductor_compiles_the_llama_training_step_into_the_cpus_kernels():
    # my_asic's C++ kernels are the CPU's: Inductor must fuse its graphs as it
    # does the CPU's (no extra kernels or copies from GPU-tuned heuristics).
    out = run_python(MODELS + """
import copy, re
from torch._inductor.utils import run_and_get_code
torch.manual_seed(0)
model = make("llama")
ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))

def kernels(device):
    torch._dynamo.reset()
    m = copy.deepcopy(model).to(device)
    step = lambda: torch.compile(m)(input_ids=ids.to(device), labels=ids.to(device)).loss.backward()
    _, codes = run_and_get_code(step)
    return [re.findall(r"^(cpp_fused_\\w+) = ", code, re.M) for code in codes]

on_cpu, on_device = kernels("cpu"), kernels("my_asic")
assert len(on_cpu) == 2 and all(on_cpu), on_cpu  # forward and backward
assert on_device == on_cpu, (on_device, on_cpu)
print("ok")
""", env=MODES["host_addressable"])
    assert last_line(out) == "ok"
