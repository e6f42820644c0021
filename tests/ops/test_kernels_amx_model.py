"""The amx level's attention code agrees with the float32 kernels, on any CPU that runs AVX512-BF16.

AMX itself is on few machines (not on CI's), so amx_model/amx_tile_model.cpp
compiles attention.h at the amx level with the tile instructions replaced by a
scalar model of them (the model is a fake of hardware we cannot have here) and
compares decode and prefill with the float32 path. On a Xeon with AMX the
kernel tests run the real instructions at KP_CPU_ISA=amx.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).parent / "amx_model" / "amx_tile_model.cpp"
FLAGS = ["-O1", "-std=c++17", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mavx512bf16",
         "-mamx-tile", "-mamx-bf16", "-mavx2", "-mfma", "-mf16c"]


def test_amx_attention_on_a_scalar_model_of_the_tiles_matches_float32(tmp_path):
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    binary = tmp_path / "amx_tile_model"
    built = subprocess.run([compiler, *FLAGS, f"-I{REPO_ROOT / 'csrc'}", str(SOURCE), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and ("-mamx" in built.stderr or "unrecognized" in built.stderr):
        pytest.skip(f"the compiler has no AMX flags: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    if run.returncode == -4:  # SIGILL: the CPU cannot execute AVX-512 / AVX512-BF16 instructions
        pytest.skip("this CPU cannot execute AVX512-BF16 instructions")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "prefill" in run.stdout and "T=300" in run.stdout
