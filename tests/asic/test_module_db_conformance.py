"""PyTorch's module database (module_db) on my_asic against the CPU, float32, every module.

The comparison lives in the conformance kit (kernel_pytorch.asic.conformance.module_db):
each ModuleInfo is built on the CPU, deep-copied to my_asic and run on the same inputs;
outputs, input gradients and parameter gradients must agree (shapes for random modules
such as Dropout), or both devices raise. The kit's short form (tests/conformance) runs
a representative subset on every runtime; here every module runs on the simulator in
both memory modes (first two inputs each; the slow variant runs all of them):

    pytest -m slow tests/asic/test_module_db_conformance.py -s
"""

import pytest

from kernel_pytorch.asic.conformance import resolve_runtime

# The worker imports torch.testing._internal (module_db), which needs the expecttest
# package; torch does not depend on it, so a plain torch install may lack it.
pytest.importorskip("expecttest", reason="torch.testing._internal (module_db) needs the expecttest package")
from kernel_pytorch.asic.conformance.module_db import all_module_ids, run_modules  # noqa: E402

# module id -> reason; a listed module that passes fails the suite.
EXPECTED_FAILURES = {}


def sweep(mode, inputs):
    runtime = resolve_runtime("myasic", f"host_addressable={int(mode == 'host_addressable')}")
    modules = all_module_ids(runtime)
    results = run_modules(modules, runtime, inputs)
    ran = {m: r for m, r in results.items() if not r.startswith("skip")}
    passed = sum(r == "pass" for r in ran.values())
    crashes = [m for m, r in ran.items() if r.startswith(("crash", "not run"))]
    unexpected = {m: r for m, r in ran.items()
                  if (r != "pass") != (m in EXPECTED_FAILURES)}
    print(f"\nmodule_db float32 ({mode}, {inputs} inputs each): {passed}/{len(ran)} modules pass, "
          f"{len(crashes)} crashes")
    return modules, results, crashes, unexpected


@pytest.mark.usefixtures("device_count")
@pytest.mark.parametrize("mode", ["host_addressable", "not_host_addressable"])
def test_every_module_matches_cpu(mode, capsys):
    with capsys.disabled():
        modules, results, crashes, unexpected = sweep(mode, inputs=2)
    assert len(modules) > 100 and set(results) == set(modules)
    assert crashes == []
    assert unexpected == {}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["host_addressable", "not_host_addressable"])
def test_every_module_input_matches_cpu(mode, capsys):
    with capsys.disabled():
        _, _, crashes, unexpected = sweep(mode, inputs=1000)
    assert crashes == [] and unexpected == {}
