"""The "my_asic" compile backend calls kernel_pytorch.rms_norm for hand-written RMSNorm.

Runs on a runtime without host-addressable memory (MY_ASIC_HOST_ADDRESSABLE=0),
where torch.compile picks the "my_asic" backend; each case in its own interpreter.
"""

import pytest

from device_subprocess import last_line, run_python

pytest.importorskip("transformers")

pytestmark = [
    pytest.mark.usefixtures("device_count"),
    pytest.mark.skipif(not __import__("kernel_pytorch.asic.compile_patterns", fromlist=["supported"]).supported(),
                       reason="this torch's pattern matcher cannot trace without decompositions (torch 2.11)"),
]

DEVICE_ONLY = {"MY_ASIC_HOST_ADDRESSABLE": "0"}


def test_llama_inference_graph_calls_rms_norm_for_every_norm():
    out = run_python("""
        import copy, torch, transformers, kernel_pytorch
        from kernel_pytorch.asic import compile_patterns
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=128, max_position_embeddings=64)
        cpu = transformers.LlamaForCausalLM(config)
        ids = torch.randint(0, 128, (2, 16))
        compiled = torch.compile(copy.deepcopy(cpu).to("my_asic"), fullgraph=True)
        with torch.no_grad():
            logits = compiled(input_ids=ids.to("my_asic")).logits
            torch.testing.assert_close(logits.cpu(), cpu(input_ids=ids).logits, rtol=1e-4, atol=1e-5)
        print(compile_patterns.replacements["rms_norm"])
    """, env=DEVICE_ONLY)
    assert last_line(out) == "5"  # two per decoder layer and the final norm


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_training_graph_uses_rms_norm_forward_and_backward(dtype):
    out = run_python(f"""
        import copy, torch, kernel_pytorch
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
        from kernel_pytorch.asic import compile_patterns
        torch.manual_seed(0)
        cpu = LlamaRMSNorm(64, eps=1e-5).to(torch.{dtype})
        with torch.no_grad():
            cpu.weight.uniform_(0.5, 1.5)
        dev = copy.deepcopy(cpu).to("my_asic")
        x = torch.randn(3, 5, 64, dtype=torch.{dtype}, requires_grad=True)
        xd = x.detach().to("my_asic").requires_grad_()
        cpu(x).float().square().sum().backward()
        torch.compile(dev)(xd).float().square().sum().backward()
        tol = dict(rtol=1e-4, atol=1e-5) if x.dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)  # fused: one rounding, not six
        torch.testing.assert_close(xd.grad.cpu(), x.grad, **tol)
        torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad, **tol)
        print(compile_patterns.replacements["rms_norm"])
    """, env=DEVICE_ONLY)
    assert last_line(out) == "1"


def test_rms_norm_with_a_weight_of_another_dtype_is_left_alone():
    # kernel_pytorch.rms_norm takes a weight of x's dtype: a float32 weight over
    # bfloat16 activations (upcast output) stays as written.
    out = run_python("""
        import torch, kernel_pytorch
        from transformers.models.llama.modeling_llama import LlamaRMSNorm
        from kernel_pytorch.asic import compile_patterns
        norm = LlamaRMSNorm(64).to("my_asic")
        x = torch.randn(2, 64, dtype=torch.bfloat16, device="my_asic")
        with torch.no_grad():
            out = torch.compile(norm)(x)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.cpu(), norm.to("cpu")(x.cpu()))
        print(compile_patterns.replacements["rms_norm"])
    """, env=DEVICE_ONLY)
    assert last_line(out) == "0"
