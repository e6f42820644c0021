"""Specification of `python -m kernel_pytorch devices|backends|select|estimate`.

Runs against the real devices of the machine (at least the CPU is always there).
"""

import json
import os
import subprocess
import sys

import pytest

from kernel_pytorch.cli import main

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LLAMA2_7B_ARGS = ["--hidden", "4096", "--intermediate", "11008", "--layers", "32", "--vocab", "32000", "--heads", "32"]


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_devices_prints_a_table_with_the_cpu(capsys):
    code, out, _ = run_cli(capsys, "devices")
    header = out.splitlines()[0]
    assert code == 0
    for column in ("DEVICE", "VENDOR", "TOTAL GB", "FREE GB", "bf16 TFLOPS"):
        assert column in header
    assert any(line.startswith("cpu ") and " cpu " in line for line in out.splitlines())


def test_devices_json_lists_devices_and_unavailable_vendors(capsys):
    code, out, _ = run_cli(capsys, "devices", "--json")
    payload = json.loads(out)
    assert code == 0
    cpu = [d for d in payload["devices"] if d["vendor"] == "cpu"]
    assert len(cpu) == 1 and cpu[0]["memory_total_gb"] > 0 and "bf16" in cpu[0]["peak_tflops"]
    assert isinstance(payload["unavailable_vendors"], dict)


def test_devices_says_how_to_make_each_opencl_device_the_my_asic_device(capsys):
    _, out, _ = run_cli(capsys, "devices", "--json")
    opencl = [d for d in json.loads(out)["devices"] if d["vendor"] == "opencl"]
    if not opencl:
        pytest.skip("no OpenCL device here (install pocl-opencl-icd)")
    _, table, _ = run_cli(capsys, "devices")
    for device in opencl:
        assert f'MY_ASIC_RUNTIME=opencl MY_ASIC_RUNTIME_OPTIONS="device={device["name"]}"' in table


def test_devices_json_names_each_device_as_the_table_does(capsys):
    _, table, _ = run_cli(capsys, "devices")
    _, out, _ = run_cli(capsys, "devices", "--json")
    footer = ("Peak", "not found", "could not", "To run my_asic", " ", "Simulated", "overcommitted")
    first_column = [line.split()[0] for line in table.splitlines()[2:] if line and not line.startswith(footer)]
    assert [d["device"] for d in json.loads(out)["devices"]] == first_column
    for device in json.loads(out)["devices"]:
        if not device["torch_usable"]:  # e.g. PoCL's OpenCL CPU device
            assert device["device"] == f"{device['vendor']}:{device['index']}"


def test_backends_summary_recommends_a_backend(capsys):
    code, out, _ = run_cli(capsys, "backends")
    assert code == 0
    assert "\u2713 cpu" in out
    assert "Recommended backend: " in out


def test_backends_json_marks_the_cpu_available(capsys):
    code, out, _ = run_cli(capsys, "backends", "--json")
    cpu = {entry["name"]: entry for entry in json.loads(out)}["cpu"]
    assert code == 0 and cpu["available"] and cpu["device"] == "cpu"


def test_select_reports_the_chosen_device_and_exits_zero(capsys):
    code, out, _ = run_cli(capsys, "select", "--memory-gb", "0.5", "--tflops", "0.001", "--vendors", "custom_asic,cpu")
    assert code == 0
    assert out.startswith("selected: ")
    assert "#0 " in out


def test_select_exits_one_and_explains_when_nothing_fits(capsys):
    code, out, _ = run_cli(capsys, "select", "--memory-gb", "1000000", "--tflops", "1", "--vendors", "cpu")
    assert code == 1
    assert out.startswith("no device has 1e+06 GB free and 1 bf16 TFLOPS")
    assert "rejected cpu [cpu]" in out and "short by" in out


def test_select_json_carries_the_selection_and_every_verdict(capsys):
    code, out, _ = run_cli(capsys, "select", "--memory-gb", "0.5", "--vendors", "cpu", "--dtype", "float32", "--json")
    payload = json.loads(out)
    assert code == 0
    assert payload["requirement"] == {"memory_gb": 0.5, "tflops": 0.0, "dtype": "fp32", "vendors": ["cpu"]}
    assert payload["selected"]["vendor"] == "cpu" and payload["selected"]["rank"] == 0
    assert len(payload["verdicts"]) >= 1


def test_estimate_prints_the_breakdown(capsys):
    code, out, _ = run_cli(capsys, "estimate", *LLAMA2_7B_ARGS, "--max-seq-len", "4096")
    assert code == 0
    assert "parameters: 6,738,415,616" in out
    assert "kv cache" in out and "2.00 GiB" in out


def test_estimate_json_is_in_bytes(capsys):
    code, out, _ = run_cli(capsys, "estimate", *LLAMA2_7B_ARGS, "--max-seq-len", "4096", "--json")
    payload = json.loads(out)
    assert code == 0
    assert payload["kv_cache_bytes"] == 2 * 1024**3
    assert payload["total_bytes"] == payload["weights_bytes"] + payload["kv_cache_bytes"] + payload["activations_bytes"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["select", "--memory-gb", "8", "--vendors", "nvidai"], "unknown hardware vendor 'nvidai'"),
        (["select", "--memory-gb", "-1"], "'-1' must be >= 0"),
        (["select", "--memory-gb", "8", "--dtype", "complex64"], "no precision class for 'complex64'"),
        (["estimate", *LLAMA2_7B_ARGS[:-1], "30"], "heads (30) must divide hidden (4096)"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_exits_two_naming_the_problem(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_module_entry_point_runs_the_cli():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, "-m", "kernel_pytorch", "estimate", *LLAMA2_7B_ARGS, "--json"],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["parameter_count"] == 6_738_415_616
