"""Process groups written the ways users write them reach myccl for my_asic
tensors: an explicit backend string, device_id= with no backend, no
arguments at all, new_group, and torchrun with one device per local rank."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ranks import HERE, run_ranks, subprocess_environment


def test_device_id_without_a_backend_picks_myccl():
    for result in run_ranks("group_programs:default_backend_from_device_id", 2):
        assert result["backend"] == "myccl"
        assert result["my_asic_sum"] == [3.0, 3.0]


def test_no_arguments_picks_myccl_for_the_my_asic_accelerator():
    for result in run_ranks("group_programs:default_backends_without_arguments", 2):
        assert result["my_asic_sum"] == [3.0, 3.0]
        assert result["my_asic_backend"] == "MycclBackend"


@pytest.mark.slow
def test_new_group_runs_collectives_on_a_subset():
    results = run_ranks("group_programs:new_group_of_even_ranks", 4, env={"MY_ASIC_DEVICE_COUNT": "4"})
    for rank, result in enumerate(results):
        assert result["world_sum"] == [10.0, 10.0]
        assert result["evens_sum"] == ([4.0, 4.0] if rank % 2 == 0 else [rank + 1.0] * 2)
        if rank % 2 == 0:
            assert result["evens_backend"] == "my_asic:myccl,cpu:gloo"


def test_torchrun_with_one_my_asic_device_per_local_rank():
    out = tempfile.mkdtemp(prefix="kp_torchrun_")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(HERE / "torchrun_script.py"), out],
        env=subprocess_environment({"OMP_NUM_THREADS": "1"}), cwd=out, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads(Path(out, f"rank{r}.json").read_text()) for r in range(2)]
    for rank, result in enumerate(results):
        assert result["device"] == f"my_asic:{rank}"
        assert result["sum"] == [3.0, 3.0]
        assert (result["rank"], result["world"], result["backend"]) == (rank, 2, "myccl")
