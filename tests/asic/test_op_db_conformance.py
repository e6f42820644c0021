"""PyTorch's operator database (op_db) on my_asic against the CPU, float32.

Each OpInfo's first samples run on both devices (op_db_worker.py) and must
agree: values within test_compare_cpu's tolerances for deterministic ops,
shape/dtype/device for random ones, or both raise. Backward compares input
gradients. Chunks of ops run in subprocesses; when one dies, the op it died in
is reported as a crash and the rest of the chunk goes on in a new process.

A representative subset runs by default; the whole database is marked slow:

    pytest -m slow tests/asic/test_op_db_conformance.py -s   # prints the counts
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from device_subprocess import subprocess_environment

# The worker imports torch.testing._internal (op_db), which needs the expecttest
# package; torch does not depend on it, so a plain torch install may lack it.
pytest.importorskip("expecttest", reason="torch.testing._internal (op_db) needs the expecttest package")
from op_db_expected_failures import EXPECTED_FAILURES

WORKER = Path(__file__).with_name("op_db_worker.py")
CHUNK_TIMEOUT_S = 1800

# One or more ops of each kind: elementwise, reductions, matmul family,
# indexing, shape ops, nn layers and losses, random, fft, linalg, complex.
REPRESENTATIVE = [
    "add", "mul", "div.no_rounding_mode", "pow", "exp", "log", "sigmoid", "tanh", "abs", "clamp", "where",
    "sum", "mean", "amax", "std", "cumsum", "max.reduction_with_dim", "sort", "topk", "argmax",
    "matmul", "mm", "bmm", "addmm", "baddbmm", "nn.functional.linear", "linalg.norm", "linalg.solve",
    "index_select", "gather", "scatter_add", "index_put", "masked_fill", "take_along_dim",
    "cat", "stack", "reshape", "permute", "transpose", "narrow", "flip", "roll", "repeat",
    "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "softmax", "log_softmax",
    "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.layer_norm", "nn.functional.batch_norm",
    "nn.functional.embedding", "nn.functional.linear", "nn.functional.cross_entropy", "nn.functional.mse_loss",
    "nn.functional.dropout", "normal", "bernoulli", "fft.fft", "fft.ifft", "fft.hfft", "conj_physical", "real",
]


def run_chunk(ops, backward=True, env=None, dtype="float32"):
    """{op id: result dict} for ``ops``, run in one subprocess (rerun singly after a crash)."""
    command = [sys.executable, str(WORKER), "--ops", ",".join(ops), "--dtype", dtype] + (
        ["--backward"] if backward else []
    )
    completed = subprocess.run(
        command, env=subprocess_environment(env), capture_output=True, text=True, timeout=CHUNK_TIMEOUT_S,
        cwd=Path(__file__).parent,
    )
    results = {}
    for line in completed.stdout.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            results[entry["op"]] = entry
    missing = [op for op in ops if op not in results]
    if missing:
        # Results come in order, so the first op without one is where the
        # worker died; record it and go on with the rest in a fresh process.
        why = f"crash: exit status {completed.returncode}: {completed.stderr.strip()[-300:]}"
        results[missing[0]] = {"op": missing[0], "forward": why, "backward": why}
        if len(missing) > 1:
            results.update(run_chunk(missing[1:], backward, env, dtype))
    return results


def failures(results, mode):
    """[(op, phase, result)] that neither pass, skip, nor are expected to fail in ``mode``."""
    found = []
    for op, entry in sorted(results.items()):
        listed = EXPECTED_FAILURES.get(op, {})
        applies = mode in listed.get("modes", ("host_addressable", "not_host_addressable"))
        for phase in ("forward", "backward"):
            result = entry[phase]
            expected = listed.get(phase) if applies else None
            if result == "pass" and expected:
                found.append((op, phase, f"passes but is listed as expected to fail ({expected})"))
            elif not result.startswith(("pass", "skip")) and not expected:
                found.append((op, phase, result))
    return found


def counts(results, phase):
    ran = [e[phase] for e in results.values() if not e[phase].startswith("skip")]
    return sum(r == "pass" for r in ran), len(ran), sum(r.startswith("crash") for r in ran)


@pytest.fixture(scope="module")
def representative_results():
    return run_chunk(REPRESENTATIVE)


@pytest.mark.usefixtures("device_count")
def test_representative_ops_match_cpu_forward_and_backward(representative_results):
    assert set(representative_results) == set(REPRESENTATIVE)
    assert failures(representative_results, "host_addressable") == []


@pytest.mark.usefixtures("device_count")
def test_representative_ops_match_cpu_without_host_addressable_memory():
    results = run_chunk(REPRESENTATIVE, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    assert failures(results, "not_host_addressable") == []


@pytest.mark.usefixtures("device_count")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64", "bool"])
def test_representative_ops_match_cpu_at_other_dtypes(dtype, capsys):
    # The smaller sweep: the representative ops (forward, and backward for the
    # floating types) at each dtype the CPU supports for them.
    results = run_chunk(REPRESENTATIVE, env=None, dtype=dtype)
    forward, backward = counts(results, "forward"), counts(results, "backward")
    with capsys.disabled():
        print(f"\nop_db representative {dtype}: forward {forward[0]}/{forward[1]} pass, "
              f"backward {backward[0]}/{backward[1]} pass")
    assert failures(results, "host_addressable") == []


def all_op_ids():
    completed = subprocess.run(
        [sys.executable, "-c", "from torch.testing._internal.common_methods_invocations import op_db\n"
         "from op_db_worker import op_id\nprint(','.join(op_id(o) for o in op_db))"],
        env=subprocess_environment(), capture_output=True, text=True, timeout=300, cwd=Path(__file__).parent,
    )
    return completed.stdout.strip().split(",")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["host_addressable", "not_host_addressable"])
def test_whole_op_db_float32(mode, capsys):
    ops = all_op_ids()
    env = {"MY_ASIC_HOST_ADDRESSABLE": "1" if mode == "host_addressable" else "0"}
    results = {}
    chunk = 60
    for i in range(0, len(ops), chunk):
        results.update(run_chunk(ops[i:i + chunk], env=env))
        print(f"op_db {mode}: {min(i + chunk, len(ops))}/{len(ops)} OpInfos", file=sys.stderr, flush=True)
    forward, backward = counts(results, "forward"), counts(results, "backward")
    with capsys.disabled():
        print(f"\nop_db float32 ({mode}): forward {forward[0]}/{forward[1]} pass, {forward[2]} crashes; "
              f"backward {backward[0]}/{backward[1]} pass, {backward[2]} crashes")
        for op, phase, result in failures(results, mode):
            print(f"  {op} [{phase}]: {result}")
    assert forward[2] == 0 and backward[2] == 0
    assert failures(results, mode) == []
    assert forward[0] >= 0.99 * forward[1] and backward[0] >= 0.99 * backward[1]
