"""benchmarks/kernels.py and demos/llama_demo.py run end to end (small settings, fresh processes).

Runs that include my_asic take the ``my_asic`` fixture: its subprocess has my_asic
exactly when this process does (beside a GPU only with MY_ASIC_ENABLE=1).
"""

import json
import subprocess
import sys

import pytest

from device_subprocess import REPO_ROOT, subprocess_environment

OPS_IN_BENCHMARK = {"rms_norm", "fused_add_rms_norm", "silu_and_mul", "apply_rope", "softmax",
                    "decode_attention", "prefill_attention", "matmul_vec"}


def run_script(path, *args, cwd, timeout=240):
    return subprocess.run([sys.executable, str(REPO_ROOT / path), *args], cwd=cwd, env=subprocess_environment(),
                          capture_output=True, text=True, timeout=timeout)


def _benchmark_json(tmp_path, *extra):
    out = tmp_path / "kernels.json"
    result = run_script("benchmarks/kernels.py", "--quick", "--seconds", "0.02", "--output", str(out), *extra,
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, json.loads(out.read_text())


def test_quick_benchmark_writes_every_op_with_times_ratios_and_no_fallback(tmp_path, my_asic):
    result, data = _benchmark_json(tmp_path, "--no-compile")
    rows = data["results"]
    assert {r["op"] for r in rows} == OPS_IN_BENCHMARK
    assert len(rows) == 9  # decode at B=1 and B=8
    for r in rows:
        assert set(r["ms"]) == {"eager", "ours", "my_asic", "clone"}, r["op"]
        assert all(v > 0 for v in r["ms"].values()), r
        assert r["bytes"] > 0 and r["gb_per_s"]["ours"] > 0
        assert r["ratios"]["ours_vs_eager_speedup"] > 0 and r["ratios"]["my_asic_over_cpu_time"] > 0
        assert r["my_asic_fallback_calls"] == 0, (r["op"], r["my_asic_fallback_ops"])
        assert r["max_abs_diff_vs_eager"] < 1e-3, (r["op"], r["max_abs_diff_vs_eager"])
        assert r["my_asic_max_abs_diff_vs_eager"] < 1e-3, (r["op"], r["my_asic_max_abs_diff_vs_eager"])
    assert "x eager" in result.stdout and "rms_norm" in result.stdout
    assert "]" in result.stderr  # the progress bar


@pytest.mark.slow
def test_benchmark_device_cpu_leaves_my_asic_out(tmp_path):
    _, data = _benchmark_json(tmp_path, "--no-compile", "--device", "cpu", "--ops", "rms_norm")
    (row,) = data["results"]
    assert set(row["ms"]) == {"eager", "ours", "clone"}
    assert "my_asic_fallback_calls" not in row


@pytest.mark.slow
def test_quick_benchmark_with_torch_compile(tmp_path, my_asic):
    _, data = _benchmark_json(tmp_path, "--ops", "rms_norm,silu_and_mul", "--dtypes", "float32,bfloat16")
    assert len(data["results"]) == 4
    for r in data["results"]:
        assert r["ms"]["compile"] > 0 and r["ratios"]["ours_vs_compile_speedup"] > 0


def test_threads_sweep_measures_each_case_at_each_thread_count_and_prints_the_scaling_table(tmp_path):
    result, data = _benchmark_json(tmp_path, "--no-compile", "--device", "cpu", "--ops", "rms_norm,decode_attention",
                                   "--dtypes", "bfloat16", "--threads", "2,1")
    assert data["thread_counts"] == [1, 2]
    rows = {(r["op"], r["shape"], r["threads"]): r for r in data["results"]}
    assert len(rows) == 6  # rms_norm and decode at B=1 and B=8, each at 1 and 2 threads
    for r in data["results"]:
        assert r["ms"]["ours"] > 0 and r["ratios"]["ours_fraction_of_clone_bandwidth"] > 0
        assert set(r["scaling_targets"]) == ({">=0.85x clone"} if r["op"] == "rms_norm" else {">=0.7x clone", ">=1x SDPA"})
    missed = {(m[0], m[3], m[4]) for m in data["scaling_targets_missed"]}
    assert missed == {(r["op"], r["threads"], k) for r in data["results"] for k, ok in r["scaling_targets"].items() if not ok}
    assert "scaling with threads" in result.stdout and "1 thr" in result.stdout and "2 thr" in result.stdout


def test_cold_cache_mode_gives_every_call_operands_the_cache_has_not_seen(tmp_path):
    _, data = _benchmark_json(tmp_path, "--no-compile", "--device", "cpu", "--ops", "rms_norm", "--cache", "cold")
    (row,) = data["results"]
    llc = data["machine"]["last_level_cache_bytes"]
    assert data["machine"]["cache"] == "cold" and row["cache"] == "cold"
    assert llc > 0 and row["cold_copies"] * row["bytes"] >= 2 * llc
    assert row["ms"]["ours"] > 0 and row["ms"]["clone"] > 0 and row["max_abs_diff_vs_eager"] < 1e-3


def test_benchmark_rejects_a_thread_count_that_is_not_a_number(tmp_path):
    result = run_script("benchmarks/kernels.py", "--quick", "--threads", "1,many", cwd=tmp_path)
    assert result.returncode != 0 and "positive thread count" in result.stderr


@pytest.mark.slow
def test_benchmark_rejects_an_unknown_op(tmp_path):
    result = run_script("benchmarks/kernels.py", "--quick", "--ops", "gemm", cwd=tmp_path)
    assert result.returncode != 0 and "unknown op" in result.stderr


DEMO_SMALL = ("--tokens", "4", "--prompt-length", "5", "--hidden", "64", "--layers", "2", "--heads", "4",
              "--kv-heads", "2", "--intermediate", "96", "--vocab", "64")


def test_llama_demo_agrees_with_plain_pytorch_on_cpu_and_my_asic(tmp_path, my_asic):
    result = run_script("demos/llama_demo.py", *DEMO_SMALL, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    out = result.stdout
    assert "PASS" in out and "MISMATCH" not in out
    assert "cpu and my_asic generated the same tokens: True" in out
    assert "kernel_pytorch ops among them: none" in out
    assert "backend_info()" in out and "tok/s" in out


@pytest.mark.slow
def test_llama_demo_bfloat16(tmp_path):
    result = run_script("demos/llama_demo.py", *DEMO_SMALL, "--dtype", "bfloat16", "--device", "cpu", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "PASS" in result.stdout
