"""backend_info(), ISA selection by environment, and a runtime without kernels (counted CPU fallback)."""

import json
import os
import shutil
import subprocess

import pytest
import torch

import kernel_pytorch.ops as kops
from device_subprocess import REPO_ROOT, last_line, run_python
from kernel_cases import HERE_FOR_SUBPROCESS

TINY_RUNTIME_SOURCE = REPO_ROOT / "tests" / "runtime" / "tiny_runtime" / "tiny_runtime.c"


def test_backend_info_names_every_device_type():
    info = kops.backend_info()
    # my_asic_compile: how torch.compile compiles my_asic graphs, once the device is registered.
    expected = {"cpu", "my_asic", "cuda"} | ({"my_asic_compile"} if hasattr(torch, "my_asic") else set())
    assert set(info) == expected
    assert all(isinstance(v, str) and v for v in info.values())


def test_backend_info_cpu_names_the_running_and_best_isa(cpu_isa):
    info = kops.backend_info()["cpu"]
    assert info.startswith(f"kernel library, {cpu_isa} ")
    assert "best on this CPU: " in info


def test_backend_info_cuda_says_not_built_on_a_cpu_build():
    if torch.cuda.is_available():
        pytest.skip("CUDA machine")
    assert kops.backend_info()["cuda"].startswith("not built")


def test_auto_picks_the_best_level():
    kops.set_cpu_isa("auto")
    assert kops.backend_info()["cpu"] == f"kernel library, {kops.cpu_isa()} (best on this CPU: {kops.cpu_isa()})"


def test_kp_cpu_isa_environment_variable_sets_the_starting_level():
    # generic is below the best level of every CPU, so the variable must be what selects it.
    out = run_python("import kernel_pytorch.ops as k; print(k.cpu_isa())", env={"KP_CPU_ISA": "generic"})
    assert last_line(out) == "generic"


def test_kp_cpu_isa_with_an_unknown_level_warns_and_runs_the_best_level():
    from device_subprocess import run_python_process

    result = run_python_process("import kernel_pytorch.ops as k; print(k.cpu_isa())", env={"KP_CPU_ISA": "sse9"})
    assert result.returncode == 0, result.stderr
    assert last_line(result.stdout) == kops._C._kp_best_cpu_isa()
    assert "KP_CPU_ISA='sse9'" in result.stderr and "generic|avx2|avx512" in result.stderr


@pytest.fixture(scope="module")
def tiny_runtime(tmp_path_factory):
    """libtinychip.so (tests/runtime/tiny_runtime): a second kpdr runtime whose kernel table
    holds only a float32 silu (gated and not)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the tiny runtime")
    out = tmp_path_factory.mktemp("tiny") / "libtinychip.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-I", str(REPO_ROOT / "csrc" / "runtime"),
                    str(TINY_RUNTIME_SOURCE), "-o", str(out)], check=True)
    return str(out)


TINY_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
import torch, kernel_pytorch, kernel_pytorch.ops as kops
from kernel_pytorch import asic
from kernel_pytorch.asic.custom_device import (
    CustomDeviceBackend, PrivateUse1Config, register_custom_device)
from kernel_cases import DTYPES, all_case_ids, check_case_safely as check_case

class TinyBackend(CustomDeviceBackend):
    def initialize_device(self, i): return True
    def get_device_count(self): return 3
    def get_device_properties(self, i): return {{"name": f"TinyChip-{{i}}", "memory": 1024}}

register_custom_device(TinyBackend("my_asic"), PrivateUse1Config(backend_library={lib!r}))
asic.reset_fallback_stats()
results = {{}}
for dtype in (torch.float32, torch.bfloat16):
    asic.reset_fallback_stats()
    problems = [f"{{op}}[{{case}}]: {{p}}"[:300] for op, case in all_case_ids()
                for p in [check_case(op, case, dtype, "my_asic")] if p is not None]
    results[str(dtype).replace("torch.", "")] = {{
        "info": kops.backend_info()["my_asic"], "problems": problems,
        "fallback": asic.fallback_stats(), "device": torch.my_asic.get_device_name(0)}}
print(json.dumps(results))
"""

MISSING_FROM_TINY = ("rms_norm", "fused_add_rms_norm", "apply_rope", "softmax", "decode_attention",
                     "prefill_attention", "matmul_vec")


_TINY_RESULTS = {}


def _run_tiny(tiny_runtime, dtype):
    """Every case at float32 and bfloat16 on TinyChip in one fresh process (once per session)."""
    if not _TINY_RESULTS:
        code = TINY_SCRIPT.format(here=HERE_FOR_SUBPROCESS, lib=tiny_runtime)
        _TINY_RESULTS.update(json.loads(last_line(run_python(code, env={"MY_ASIC_ENABLE": "1"}))))
    return _TINY_RESULTS[dtype]


def test_backend_info_lists_what_the_tiny_runtime_lacks(tiny_runtime):
    result = _run_tiny(tiny_runtime, "float32")
    assert result["device"] == "TinyChip-0"
    assert result["info"] == ("runtime kernels, cpu fallback for decode_attention, matmul_vec, "
                              "prefill_attention, rms_norm, rope, softmax")


def test_ops_the_tiny_runtime_lacks_run_through_the_counted_cpu_fallback(tiny_runtime):
    result = _run_tiny(tiny_runtime, "float32")
    assert result["problems"] == []
    for op in MISSING_FROM_TINY:
        assert result["fallback"].get(f"kernel_pytorch::{op}", 0) > 0, f"{op} did not fall back: {result['fallback']}"


def test_the_tiny_runtimes_own_float32_silu_runs_without_fallback(tiny_runtime):
    result = _run_tiny(tiny_runtime, "float32")
    assert "kernel_pytorch::silu" not in result["fallback"]
    assert "kernel_pytorch::silu_and_mul" not in result["fallback"]


def test_a_dtype_the_runtime_refuses_falls_back_with_correct_results(tiny_runtime):
    """tiny_silu returns KPDR_ERROR_NOT_SUPPORTED for bfloat16: the call runs on the CPU instead."""
    result = _run_tiny(tiny_runtime, "bfloat16")
    assert result["problems"] == []
    assert result["fallback"].get("kernel_pytorch::silu", 0) > 0
    assert result["fallback"].get("kernel_pytorch::silu_and_mul", 0) > 0
