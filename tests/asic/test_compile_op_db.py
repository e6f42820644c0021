"""PyTorch's operator database through torch.compile on my_asic (host-addressable memory).

Each OpInfo's first sample, compiled with the default backend (Inductor), on the
CPU and on my_asic against CPU eager (kernel_pytorch.asic.conformance.compile_op_db,
in child processes). A few ops by default (Inductor's C++ builds are slow on
small machines); the whole database with ``-m slow``, which prints the pass rate
(goal: ≥ 97% of the ops whose compiled CPU run passes, zero crashes):

    pytest -m slow tests/asic/test_compile_op_db.py -s
"""

import os
import sys

import pytest

from kernel_pytorch.asic.conformance import compile_op_db
from kernel_pytorch.asic.conformance.runtimes import resolve_runtime

pytest.importorskip("expecttest", reason="torch.testing._internal (op_db) needs the expecttest package")

pytestmark = pytest.mark.usefixtures("device_count")

SUBSET = ["add", "mul", "sum", "softmax", "nn.functional.gelu", "matmul", "nn.functional.conv2d", "cat", "where",
          "nn.functional.layer_norm"]


def simulator():
    return resolve_runtime("myasic", "host_addressable=1")


def test_compiled_ops_match_cpu_eager():
    results = compile_op_db.run_ops(SUBSET, simulator(), chunk=len(SUBSET))
    assert {op: e["cpu"] for op, e in results.items()} == {op: "pass" for op in SUBSET}
    assert {op: e["my_asic"] for op, e in results.items()} == {op: "pass" for op in SUBSET}


@pytest.mark.slow
def test_whole_op_db_through_compile(capsys):
    runtime = simulator()
    ops = compile_op_db.all_op_ids(runtime)
    jobs = int(os.environ.get("KP_TEST_JOBS", max(1, (os.cpu_count() or 2) // 2)))
    done = []

    def progress(op, _result):
        done.append(op)
        if len(done) % 50 == 0:
            print(f"compile op_db: {len(done)}/{len(ops)}", file=sys.stderr, flush=True)

    results = compile_op_db.run_ops(ops, runtime, chunk=20, jobs=jobs, progress=progress)
    passed, cpu_passed, crashes = compile_op_db.summary(results)
    with capsys.disabled():
        print(f"\ncompile op_db: {passed}/{cpu_passed} ops that compile and pass on the CPU also pass on my_asic "
              f"({passed / max(cpu_passed, 1):.1%}); {crashes} crashes")
        for op, e in sorted(results.items()):
            if e["cpu"] == "pass" and e["my_asic"] != "pass":
                print(f"  {op}: {e['my_asic']}")
    assert crashes == 0
    assert passed >= 0.97 * cpu_passed
