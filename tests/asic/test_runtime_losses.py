"""Softmax family, nll_loss / cross_entropy, argmax/argmin, var/std and layer_norm on the simulator
off host memory (MY_ASIC_HOST_ADDRESSABLE=0): they run through the runtime's softmax_dim,
nll_loss, layer_norm and reduce entries (kpdr.h's core-op section; the simulator's
kp::softmax_dim, kp::nll_loss, kp::layer_norm, kp::reduce_statistics), equal torch on the CPU
(any dim, strided inputs, weights, ignore_index, the backward ops), never fall back, and
bad calls still raise ATen's errors (through the fallback).
"""

import json

from device_subprocess import last_line, run_python
from loss_cases import script

OFF_HOST = {"MY_ASIC_HOST_ADDRESSABLE": "0"}


def test_losses_and_statistics_through_the_runtime_match_the_cpu_in_float32_without_falling_back():
    result = json.loads(last_line(run_python(script(("float32",)), env=OFF_HOST)))
    assert result["checked"] >= 100
    assert result["fallbacks"] == {}
    assert result["errors"] == 5


def test_losses_and_statistics_in_bfloat16_and_float16_match_the_cpu_without_falling_back():
    result = json.loads(last_line(run_python(script(("bfloat16", "float16")), env=OFF_HOST)))
    assert result["checked"] >= 200
    assert result["fallbacks"] == {}


def test_log_softmax_half_to_float_runs_natively_where_the_cpu_refuses_it():
    out = run_python("""
        import json, torch, kernel_pytorch
        x = torch.randn(4, 9, dtype=torch.half)
        torch.my_asic.reset_fallback_stats()
        y = torch.ops.aten._log_softmax(x.to("my_asic"), 1, True)
        g = torch.ops.aten._log_softmax_backward_data(torch.ones(4, 9, device="my_asic"), y, 1, torch.half)
        ref = torch.log_softmax(x.float(), 1)
        print(json.dumps({"dtype": str(y.dtype), "grad_dtype": str(g.dtype),
                          "err": (y.cpu() - ref).abs().max().item(),
                          "grad_err": (g.cpu().float() - (1 - ref.exp() * 9)).abs().max().item(),
                          "fallbacks": torch.my_asic.fallback_stats()}))
    """, env=OFF_HOST)
    result = json.loads(last_line(out))
    assert result["dtype"] == "torch.float32" and result["grad_dtype"] == "torch.float16"
    assert result["err"] < 1e-3 and result["grad_err"] < 1e-2
    assert result["fallbacks"] == {}


def test_an_out_of_range_target_gives_nan_not_a_crash():
    # A queued kernel cannot raise; the loss is NaN (kpdr.h's nll_loss contract) and the device stays usable.
    out = run_python("""
        import json, math, torch, kernel_pytorch
        import torch.nn.functional as F
        x = torch.randn(3, 4, device="my_asic")
        loss = F.nll_loss(x, torch.tensor([0, 9, 1], device="my_asic")).item()
        ok = F.nll_loss(x, torch.tensor([0, 3, 1], device="my_asic")).item()
        print(json.dumps({"loss_is_nan": math.isnan(loss), "ok": ok}))
    """, env=OFF_HOST)
    result = json.loads(last_line(out))
    assert result["loss_is_nan"] is True
    assert isinstance(result["ok"], float)
