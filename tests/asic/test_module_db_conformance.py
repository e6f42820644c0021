"""PyTorch's module database (module_db) on my_asic against the CPU, float32.

Every ModuleInfo is built on the CPU, deep-copied to my_asic and run on the
same inputs (module_db_worker.py): outputs, input gradients and parameter
gradients must agree (shapes for random modules such as Dropout), or both
devices raise. Runs in a subprocess per memory mode; a crash is reported
against the module it happened in. By default each module's first two
inputs run; the slow variant runs all of them:

    pytest -m slow tests/asic/test_module_db_conformance.py -s
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from device_subprocess import subprocess_environment

# The worker imports torch.testing._internal (module_db), which needs the expecttest
# package; torch does not depend on it, so a plain torch install may lack it.
pytest.importorskip("expecttest", reason="torch.testing._internal (module_db) needs the expecttest package")

WORKER = Path(__file__).with_name("module_db_worker.py")
TIMEOUT_S = 1800

# module id -> reason; a listed module that passes fails the suite.
EXPECTED_FAILURES = {}


def all_module_ids():
    completed = subprocess.run(
        [sys.executable, "-c", "from torch.testing._internal.common_modules import module_db\n"
         "print(','.join(m.name for m in module_db))"],
        env=subprocess_environment(), capture_output=True, text=True, timeout=300,
    )
    return completed.stdout.strip().split(",")


def run_modules(modules, inputs, env):
    """{module id: result}; after a crash the module it died in is recorded and the rest go on."""
    completed = subprocess.run(
        [sys.executable, str(WORKER), "--modules", ",".join(modules), "--inputs", str(inputs)],
        env=subprocess_environment(env), capture_output=True, text=True, timeout=TIMEOUT_S,
        cwd=Path(__file__).parent,
    )
    results = {}
    for line in completed.stdout.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            results[entry["module"]] = entry["result"]
    missing = [m for m in modules if m not in results]
    if missing:
        results[missing[0]] = f"crash: exit status {completed.returncode}: {completed.stderr.strip()[-300:]}"
        if len(missing) > 1:
            results.update(run_modules(missing[1:], inputs, env))
    return results


def sweep(mode, inputs):
    env = {"MY_ASIC_HOST_ADDRESSABLE": "1" if mode == "host_addressable" else "0"}
    modules = all_module_ids()
    results = run_modules(modules, inputs, env)
    ran = {m: r for m, r in results.items() if not r.startswith("skip")}
    passed = sum(r == "pass" for r in ran.values())
    crashes = [m for m, r in ran.items() if r.startswith("crash")]
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
