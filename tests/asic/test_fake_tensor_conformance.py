"""Fake tensors predict my_asic's outputs: sizes, strides, offsets, aliasing.

torch.compile traces with fake tensors (meta kernels); when a my_asic kernel
returns another layout than its meta function predicts, compiled graphs go
wrong at run time (a view of a tensor that is not laid out as traced).
fake_crossref_worker.py runs op_db samples under CrossRefFakeMode, in
subprocesses, in both memory modes. A subset runs by default; the whole
database with ``-m slow`` (prints the pass rate):

    pytest -m slow tests/asic/test_fake_tensor_conformance.py -s
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from device_subprocess import run_python, subprocess_environment

pytest.importorskip("expecttest", reason="torch.testing._internal (op_db) needs the expecttest package")

pytestmark = pytest.mark.usefixtures("device_count")

WORKER = Path(__file__).with_name("fake_crossref_worker.py")
MODES = {"host_addressable": {"MY_ASIC_HOST_ADDRESSABLE": "1"},
         "not_host_addressable": {"MY_ASIC_HOST_ADDRESSABLE": "0"}}

# Ops with my_asic kernels of their own in either mode, and the layouts that
# go wrong most easily (attention, normalisation, views, reductions).
SUBSET = [
    "add", "mul", "sum", "mean", "amax", "softmax", "log_softmax", "matmul", "mm", "bmm", "addmm",
    "nn.functional.linear", "nn.functional.scaled_dot_product_attention", "nn.functional.layer_norm",
    "nn.functional.rms_norm", "nn.functional.batch_norm", "nn.functional.silu", "nn.functional.gelu",
    "nn.functional.embedding", "nn.functional.cross_entropy", "nn.functional.conv2d", "transpose", "permute",
    "index_select", "cat", "where",
]


def crossref(ops, env, backward=True):
    """{op id: result} from one worker subprocess (a crash is reported as such for the rest)."""
    command = [sys.executable, str(WORKER), "--ops", ",".join(ops)] + (["--backward"] if backward else [])
    completed = subprocess.run(command, env=subprocess_environment(env), capture_output=True, text=True,
                               timeout=1800, cwd=WORKER.parent)
    results = {}
    for line in completed.stdout.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            results[entry["op"]] = entry
    for op in ops:
        if op not in results:
            why = f"crash: exit status {completed.returncode}: {completed.stderr.strip()[-300:]}"
            results[op] = {"op": op, "forward": why, "backward": why}
            break
    missing = [op for op in ops if op not in results]
    if missing:
        results.update(crossref(missing, env, backward))
    return results


def native_mismatches(results):
    return [(op, phase, entry[phase]) for op, entry in sorted(results.items())
            for phase in ("forward", "backward") if "(native)" in entry[phase]]


def problems(results):
    return [(op, phase, entry[phase]) for op, entry in sorted(results.items())
            for phase in ("forward", "backward") if not entry[phase].startswith(("pass", "skip"))]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_fake_tensors_predict_the_subset(mode):
    results = crossref(SUBSET, MODES[mode])
    assert set(results) == set(SUBSET)
    assert problems(results) == []


@pytest.mark.parametrize("mode", sorted(MODES))
def test_llama_training_step_under_cross_ref_fake_mode(mode):
    # The layout that broke backend="aot_eager": SDPA's output on a transposed query.
    pytest.importorskip("transformers")
    out = run_python("""
        import torch, kernel_pytorch
        from torch._subclasses.fake_utils import CrossRefFakeMode
        import transformers
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, intermediate_size=128, max_position_embeddings=64)
        model = transformers.LlamaForCausalLM(config).to("my_asic")
        ids = torch.randint(0, 128, (2, 16), device="my_asic")
        with CrossRefFakeMode():
            model(input_ids=ids, labels=ids).loss.backward()
        print("ok")
    """, env=MODES[mode])
    assert out.strip().endswith("ok")


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_broadcast_operand_leaves_the_output_layout_to_the_other_operands(mode):
    # A stride-0 operand does not vote on the output's layout (TensorIterator,
    # meta): the product of an expanded column and a transposed matrix is laid
    # out like the transposed matrix, on my_asic as fake tensors predict.
    out = run_python("""
        import torch, kernel_pytorch
        x = torch.randn(3, 1, device="my_asic").expand(3, 3)
        y = torch.randn(3, 3, device="my_asic").t()
        with torch.device("meta"):
            predicted = (torch.empty_strided(x.shape, x.stride()) * torch.empty_strided(y.shape, y.stride())).stride()
        product = x * y
        assert product.stride() == predicted, (product.stride(), predicted)
        assert torch.equal(product.cpu(), x.cpu() * y.cpu())
        print("ok")
    """, env=MODES[mode])
    assert out.strip().endswith("ok")


def all_op_ids():
    completed = subprocess.run(
        [sys.executable, "-c", "from torch.testing._internal.common_methods_invocations import op_db\n"
         "from kernel_pytorch.asic.conformance.op_db import op_id\nprint(','.join(op_id(o) for o in op_db))"],
        env=subprocess_environment(), capture_output=True, text=True, timeout=300, cwd=WORKER.parent,
    )
    return completed.stdout.strip().split(",")


@pytest.mark.slow
@pytest.mark.parametrize("mode", sorted(MODES))
def test_fake_tensors_predict_the_whole_op_db(mode, capsys):
    ops = all_op_ids()
    results = {}
    for i in range(0, len(ops), 80):
        results.update(crossref(ops[i:i + 80], MODES[mode]))
        print(f"fake crossref {mode}: {min(i + 80, len(ops))}/{len(ops)} OpInfos", file=sys.stderr, flush=True)
    ran = [(op, phase) for op, entry in results.items() for phase in ("forward", "backward")
           if not entry[phase].startswith("skip")]
    failed = problems(results)
    with capsys.disabled():
        print(f"\nfake crossref ({mode}): {len(ran) - len(failed)}/{len(ran)} op/phase pairs agree; "
              f"{len(native_mismatches(results))} mismatches on native kernels")
        for op, phase, result in failed:
            print(f"  {op} [{phase}]: {result}")
    assert native_mismatches(results) == []
    assert not any(r.startswith("crash") for _, _, r in failed)
