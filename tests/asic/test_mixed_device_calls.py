"""Calls that mix my_asic and CPU tensors behave as they do on CUDA, in both memory modes.

The table (mixed_device_cases.py, checked on CUDA) runs in a fresh process per
memory mode: every case CUDA refuses raises RuntimeError, every case CUDA
takes (0-dim CPU scalars, CPU indices, copies) succeeds with the result on the
device CUDA puts it on and the values the CPU computes.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from device_subprocess import last_line, run_python
from mixed_device_cases import CASES, RANDOM_CASES, RESULT_DEVICES

MODES = {"host_addressable": "1", "not_host_addressable": "0"}
REPO_ROOT = Path(__file__).resolve().parents[2]

_TABLE_SCRIPT = """
import json, sys, torch, kernel_pytorch
sys.path.insert(0, {here!r})
from mixed_device_cases import CASES, outcome
results = {{}}
for name, call, expected in CASES:
    try:
        got, detail, devices = outcome(call, "my_asic")
    except Exception as e:
        got, detail, devices = type(e).__name__, str(e), None
    if got == "ok":
        reference = outcome(call, "cpu")[1]
        same = len(reference) == len(detail) and all(
            torch.equal(a.to(b.dtype), b) for a, b in zip(detail, reference))
        detail = "same values as on the CPU" if same else f"values {{detail}} differ from the CPU's {{reference}}"
    results[name] = [got, detail, devices]
print(json.dumps(results))
"""


@pytest.fixture(scope="module", params=sorted(MODES))
def table(request):
    """(mode, {case: [outcome, message or value check, result devices]}) for the whole table."""
    out = run_python(
        _TABLE_SCRIPT.format(here=str(Path(__file__).parent)),
        env={"MY_ASIC_HOST_ADDRESSABLE": MODES[request.param]},
    )
    return request.param, json.loads(last_line(out))


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, expected in CASES])
def test_mixed_device_call_behaves_as_on_cuda(table, name, expected):
    mode, results = table
    got, detail, devices = results[name]
    if expected == "raise":
        assert got == "raise", f"{name} ({mode}) runs where CUDA raises RuntimeError"
    else:
        assert got == "ok", f"{name} ({mode}) raises where CUDA runs: {detail}"
        if name not in RANDOM_CASES:
            assert detail == "same values as on the CPU", f"{name} ({mode}): {detail}"
        want = ["cpu" if expected == "ok-cpu" else "my_asic:0"] * len(devices)
        if name in RESULT_DEVICES:
            want = ["my_asic:0" if d == "dev" else d for d in RESULT_DEVICES[name]]
        assert devices == want, f"{name} ({mode}): results on {devices}, CUDA puts them on {want}"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_refusal_uses_pytorchs_wording_and_names_the_fix(mode):
    out = run_python(
        """
        import torch, kernel_pytorch
        try:
            torch.dot(torch.ones(4, device="my_asic"), torch.ones(4))
        except RuntimeError as e:
            print(str(e).replace("\\n", " "))
        """,
        env={"MY_ASIC_HOST_ADDRESSABLE": MODES[mode]},
    )
    message = last_line(out)
    assert message.startswith(
        "Expected all tensors to be on the same device, but found at least two devices, my_asic:0 and cpu!"
    )
    assert "'tensor' of aten::dot" in message
    assert ".to('my_asic:0')" in message


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_refused_call_leaves_the_device_usable(mode):
    out = run_python(
        """
        import torch, kernel_pytorch
        a = torch.ones(4, device="my_asic")
        for _ in range(3):
            try:
                a + torch.ones(4)
            except RuntimeError:
                pass
        print((a + torch.ones(4).to("my_asic")).sum().item(), a.device)
        """,
        env={"MY_ASIC_HOST_ADDRESSABLE": MODES[mode]},
    )
    assert last_line(out) == "8.0 my_asic:0"


def test_two_my_asic_devices_in_one_call_raise(two_devices):
    a = torch.ones(4, device=two_devices[0])
    b = torch.ones(4, device=two_devices[1])
    with pytest.raises(RuntimeError, match="my_asic:0 and my_asic:1"):
        torch.logaddexp(a, b)


@pytest.mark.skipif(not torch.__version__.startswith("2.13."),
                    reason="the table is generated from torch 2.13's native_functions.yaml, the pinned torch")
def test_the_nocheck_table_matches_the_installed_torch():
    pytest.importorskip("yaml")
    pytest.importorskip("torchgen")
    completed = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gen_device_check_table.py"), "--check"],
        capture_output=True, text=True, cwd="/",
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
