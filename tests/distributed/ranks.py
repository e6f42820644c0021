"""Running one rank program in N fresh processes, like torchrun, for the distributed tests.

Each rank is ``python run_rank.py MODULE:FUNCTION`` with torchrun's
variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) plus
``KP_INIT_METHOD``, a ``file://`` rendezvous private to the run. The function
gets (rank, world_size) and returns something JSON serialisable; the
returns come back as a list indexed by rank. Any rank failing, crashing or
outliving the deadline fails the run with every rank's output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "asic"))
from device_subprocess import subprocess_environment  # noqa: E402

DEFAULT_DEADLINE_S = 180


class RankFailure(AssertionError):
    """A rank exited non-zero, crashed or hung."""


def start_ranks(target: str, world_size: int, env: Optional[Dict[str, str]] = None,
                only_ranks: Optional[List[int]] = None):
    """Starts the ranks (all, or ``only_ranks``) of ``target`` ("module:function"); returns (procs, workdir)."""
    workdir = tempfile.mkdtemp(prefix="kp_dist_")
    procs = []
    for rank in (range(world_size) if only_ranks is None else only_ranks):
        rank_env = {
            "RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world_size),
            "KP_INIT_METHOD": "file://" + os.path.join(workdir, "rendezvous"),
            "KP_RESULT_FILE": os.path.join(workdir, f"rank{len(procs)}.json"),
            "OMP_NUM_THREADS": "1",
            **(env or {}),
        }
        environment = subprocess_environment(rank_env)
        environment["PYTHONPATH"] = os.pathsep.join([str(HERE), environment["PYTHONPATH"]])
        log = open(os.path.join(workdir, f"rank{len(procs)}.log"), "w")
        procs.append(
            subprocess.Popen(
                [sys.executable, str(HERE / "run_rank.py"), target],
                env=environment,
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    return procs, workdir


def wait_ranks(procs, workdir: str, deadline_s: float = DEFAULT_DEADLINE_S, expect_failure: bool = False) -> List[Any]:
    """Waits for every started rank; returns their results in start order (None for a rank without one)."""
    end = time.monotonic() + deadline_s
    hung = False
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung = True
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logs = "\n".join(
        f"--- rank {r} (exit {p.returncode}) ---\n" + Path(workdir, f"rank{r}.log").read_text()[-4000:]
        for r, p in enumerate(procs)
    )
    if hung:
        raise RankFailure(f"ranks still running after {deadline_s} s (a hang):\n{logs}")
    if not expect_failure and any(p.returncode != 0 for p in procs):
        raise RankFailure(f"a rank failed:\n{logs}")
    results = []
    for rank in range(len(procs)):
        path = Path(workdir, f"rank{rank}.json")
        results.append(json.loads(path.read_text()) if path.exists() else None)
    return results


def run_ranks(target: str, world_size: int, env: Optional[Dict[str, str]] = None,
              deadline_s: float = DEFAULT_DEADLINE_S) -> List[Any]:
    """Runs ``target`` on ``world_size`` ranks and returns the per-rank results."""
    procs, workdir = start_ranks(target, world_size, env)
    return wait_ranks(procs, workdir, deadline_s)
