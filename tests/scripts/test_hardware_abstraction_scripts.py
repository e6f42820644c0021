"""The Hardware Abstraction Guide's commands, run as a user runs them (``--quick``).

Each runs in a subprocess from a directory outside the repository, so the package under
test is the one on PYTHONPATH / installed, never a shadowing source tree.  The timeout only
stops a hang; the under-a-minute target is a measured figure (docs/benchmarks.md).
"""

import json
import os
import subprocess
import sys

import pytest
import torch

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.slow


def run_script(relative_path, *args, cwd):
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, relative_path), *args],
                            cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}"
    return result


def test_multi_vendor_demo_quick_selects_and_trains(tmp_path):
    out = run_script("demos/hardware_abstraction/multi_vendor_demo.py", "--quick", cwd=tmp_path).stdout
    assert "== 1. Devices across vendors" in out and "cpu" in out
    assert out.count("legacy HardwareAdapter():") == 4
    first_choice = next(line for line in out.splitlines() if "HAL choice:" in line)
    assert "(simulated)" not in first_choice  # a real device (the CPU at least) beats the simulator
    assert "(learning)" in out


def test_enhanced_demo_quick_runs_all_four_parts(tmp_path):
    out = run_script("demos/hardware_abstraction/enhanced_multi_vendor_demo.py", "--quick", cwd=tmp_path).stdout
    assert "every rank held the same weights after every step" in out
    assert "rank 0 on cpu" in out
    if hasattr(torch, "my_asic") or torch.cuda.is_available():  # a second device type in the mesh
        assert "rank 1 on my_asic:0" in out or "rank 1 on cuda:0" in out
    assert "pipeline output and gradients match the single-device run" in out
    assert "== 3. Performance comparison" in out and "fp32 TFLOPS" in out
    assert "== 4. Real-time capability analysis" in out and "workload: finished" in out


def test_enhanced_demo_rejects_unknown_parts(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "demos/hardware_abstraction/enhanced_multi_vendor_demo.py"),
                             "--parts", "mesh,telepathy"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown part(s) telepathy" in result.stderr


def test_benchmark_quick_writes_json_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    result = run_script("benchmarks/hardware_abstraction_benchmark.py", "--quick", "--output", "hal.json",
                        "--plot", "hal.png", cwd=tmp_path)
    assert "] 1/" in result.stderr  # the progress bar
    results = json.loads((tmp_path / "hal.json").read_text())
    assert results["schema"] == "kernel_pytorch.hal_benchmark/1" and results["quick"] is True
    assert results["machine"]["logical_cpus"] >= 1 and results["machine"]["devices"]
    kinds = {row["kind"] for row in results["hal_costs"]}
    assert kinds == {"hal", "baseline"} and all(row["seconds"] > 0 for row in results["hal_costs"])
    cpu = next(row for row in results["devices"] if row["device"] == "cpu")
    assert cpu["matmul"]["achieved_tflops"] > 0 and 0 < cpu["matmul"]["efficiency"] < 1.5
    assert cpu["train_step_s"] > 0
    quality = results["selection_quality"]
    assert quality["fastest"] in quality["times_s"] and quality["picks"]["hal"]["device"] in quality["times_s"]
    assert (tmp_path / "hal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
