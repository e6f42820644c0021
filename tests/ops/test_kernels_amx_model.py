"""The amx and avx512_bf16 levels' bfloat16 attention agrees with the float32 kernels, on any AVX-512 CPU.

AMX and AVX512-BF16 are on few machines (not on CI's), so amx_model/amx_tile_model.cpp
compiles attention.h at the amx level (and, with KP_MODEL_NO_AMX, as at avx512_bf16) with
the tile instructions and the bfloat16 dot-product and conversion instructions replaced by
models of them (fakes of hardware we cannot have here) and compares decode (each of its q.k
paths: tiles, vdpbf16ps and the widened float32 FMAs of the avx512 level) and prefill with the
float32 path. On a Xeon with AMX the kernel tests run the real instructions at
KP_CPU_ISA=amx and avx512_bf16.
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


@pytest.mark.parametrize("level", ["amx", "avx512_bf16"])
def test_bf16_attention_on_models_of_the_tiles_and_bf16_instructions_matches_float32(tmp_path, level):
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    binary = tmp_path / "amx_tile_model"
    defines = ["-DKP_MODEL_NO_AMX"] if level == "avx512_bf16" else []
    built = subprocess.run([compiler, *FLAGS, *defines, f"-I{REPO_ROOT / 'csrc'}", str(SOURCE), "-o", str(binary)],
                           capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and ("-mamx" in built.stderr or "unrecognized" in built.stderr):
        pytest.skip(f"the compiler has no AMX flags: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr[-3000:]
    run = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    if run.returncode == -4:  # SIGILL: the CPU cannot execute AVX-512 instructions
        pytest.skip("this CPU cannot execute AVX-512 instructions")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "prefill" in run.stdout and "T=300" in run.stdout and "D=256" in run.stdout
