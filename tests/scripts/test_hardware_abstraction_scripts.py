"""The Hardware Abstraction Guide's commands, run as a user runs them (``--quick``).

Each runs in a subprocess from a directory outside the repository, so the package under
test is the one on PYTHONPATH / installed, never a shadowing source tree.  The timeout only
stops a hang; the under-a-minute target is a measured figure (docs/benchmarks.md).
"""

import importlib.util
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
    # "the same MLP" states the same requirement as the first workload
    workloads = [line for line in out.splitlines() if line.startswith("-- ")]
    mlp = [line.split(":", 1)[1].split(", preferred")[0] for line in workloads if "MLP" in line]
    assert len(mlp) == 2 and mlp[0] == mlp[1], workloads


def test_enhanced_demo_quick_runs_all_four_parts(tmp_path):
    result = run_script("demos/hardware_abstraction/enhanced_multi_vendor_demo.py", "--quick", cwd=tmp_path)
    out = result.stdout
    assert "No backend of type" not in result.stderr  # torch's warning when a process group is torn down half-set
    assert "every rank held the same weights after every step" in out
    assert "rank 0 on cpu" in out
    if hasattr(torch, "my_asic") or torch.cuda.is_available():  # a second device type in the mesh
        assert "rank 1 on my_asic:0" in out or "rank 1 on cuda:0" in out
    assert "pipeline output and gradients match the single-device run" in out
    assert "== 3. Performance comparison" in out and "fp32 TFLOPS" in out
    assert "train step: median [round range]" in out  # the noise-robust timing, with its spread
    assert "== 4. Real-time capability analysis" in out and "workload: finished" in out


def test_enhanced_demo_rejects_unknown_parts(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "demos/hardware_abstraction/enhanced_multi_vendor_demo.py"),
                             "--parts", "mesh,telepathy"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown part(s) telepathy" in result.stderr


@pytest.fixture(scope="module")
def benchmark_run(tmp_path_factory):
    """One --quick run for every benchmark test: (results JSON, the run, its folder)."""
    tmp_path = tmp_path_factory.mktemp("hal_benchmark")
    plot = ["--plot", "hal.png"] if importlib.util.find_spec("matplotlib") else []
    result = run_script("benchmarks/hardware_abstraction_benchmark.py", "--quick", "--output", "hal.json", *plot,
                        cwd=tmp_path)
    return json.loads((tmp_path / "hal.json").read_text()), result, tmp_path


@pytest.fixture
def benchmark_results(benchmark_run):
    results, result, _ = benchmark_run
    return results, result.stdout


def test_benchmark_quick_writes_json_and_png(benchmark_run):
    results, result, tmp_path = benchmark_run
    assert "] 1/" in result.stderr  # the progress bar
    assert results["schema"] == "kernel_pytorch.hal_benchmark/2" and results["quick"] is True
    assert results["machine"]["logical_cpus"] >= 1 and results["machine"]["devices"]
    kinds = {row["kind"] for row in results["hal_costs"]}
    assert kinds == {"hal", "baseline"} and all(row["seconds"] > 0 for row in results["hal_costs"])
    cpu = next(row for row in results["devices"] if row["device"] == "cpu")
    assert cpu["matmul"]["achieved_tflops"] > 0 and 0 < cpu["matmul"]["efficiency"] < 1.5
    assert cpu["train_step_s"] > 0
    quality = results["selection_quality"]
    assert quality["fastest"] in quality["times_s"] and quality["picks"]["hal"]["device"] in quality["times_s"]
    pytest.importorskip("matplotlib")
    assert (tmp_path / "hal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_benchmark_figures_are_medians_with_their_spread(benchmark_results):
    results, _ = benchmark_results
    for row in results["hal_costs"]:
        low, high = row["spread_s"]
        assert 0 < low <= row["seconds"] <= high
    for row in results["devices"]:
        if row["matmul"]:
            low, high = row["matmul"]["achieved_tflops_spread"]
            assert low <= row["matmul"]["achieved_tflops"] <= high
    for timing in results["selection_quality"]["timings"].values():
        low, high = timing["spread_s"]
        assert low <= timing["median_s"] <= high and timing["rounds"] >= 2


def test_every_picked_device_is_measured_not_copied(benchmark_results):
    results, _ = benchmark_results
    quality = results["selection_quality"]
    for pick in quality["picks"].values():
        if pick["device"] is not None:
            assert pick["device"] in quality["timings"]  # its own measurement
            assert pick["seconds"] == quality["timings"][pick["device"]]["median_s"]


def test_every_benchmark_figure_says_whether_it_was_measured(benchmark_results):
    results, _ = benchmark_results
    figures = results["figures"]
    assert all(text.split(":")[0] in ("measured", "derived", "not measured") for text in figures.values())
    assert figures["devices[].matmul.peak_tflops"].startswith("not measured")
    assert figures["selection_quality.picks.*.seconds"].startswith("measured")


def test_benchmark_states_its_noise_band_before_the_verdict(benchmark_results):
    results, stdout = benchmark_results
    quality = results["selection_quality"]
    assert quality["noise_band"] >= 0.05
    band_line = stdout.index("noise band: +-")
    assert band_line < stdout.index("the HAL's pick is the fastest device (within the noise band):")
    hal = quality["picks"]["hal"]["device"]
    fastest = quality["best_round_s"][quality["fastest"]]
    assert quality["hal_pick_is_fastest"] == (quality["best_round_s"][hal] <= fastest * (1 + quality["noise_band"]))
    assert fastest == min(quality["best_round_s"].values())
    for device, timing in quality["timings"].items():  # the least-disturbed round is the fastest round's median
        assert quality["best_round_s"][device] == timing["spread_s"][0]
