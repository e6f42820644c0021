"""Running a script in a fresh Python process, for my_asic tests.

The device runtime's configuration is fixed the first time a process touches
the device, so tests that need another configuration (MY_ASIC_HOST_ADDRESSABLE=0,
a throttled copy link, a fresh uninitialised process, a fork) run their script
through :func:`run_python`.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

# Variables that change how the device behaves; a subprocess starts without
# them unless the test passes them, so the caller's shell cannot skew results.
DEVICE_ENVIRONMENT_VARIABLES = (
    "MY_ASIC_DEVICE_COUNT",
    "MY_ASIC_MEMORY_MB",
    "MY_ASIC_DEVICE_NAMES",
    "MY_ASIC_HOST_ADDRESSABLE",
    "MY_ASIC_COMPUTE_UNITS",
    "MY_ASIC_COPY_BANDWIDTH_GBPS",
    "MY_ASIC_OVERCOMMIT",
    "MY_ASIC_FALLBACK",
    "MY_ASIC_RUNTIME",
    "MY_ASIC_ALLOC_CONF",
    "PYTORCH_ALLOC_CONF",
    "TORCH_DEVICE_BACKEND_AUTOLOAD",
    # Deprecated names the runtime still reads (docs/environment.md).
    "MYASIC_DEVICE_COUNT",
    "MYASIC_MEMORY_MB",
    "MYASIC_DEVICE_NAMES",
    "MYASIC_HOST_ADDRESSABLE",
    "MYASIC_COMPUTE_UNITS",
    "MYASIC_COPY_BANDWIDTH_GBPS",
)

SUBPROCESS_TIMEOUT_S = 120


def subprocess_environment(env=None):
    """The environment for a test subprocess: ours, minus device settings, plus ``env``.

    The repository root goes first on PYTHONPATH so the checkout under test is
    imported even when kernel_pytorch is not pip-installed.
    """
    environment = {k: v for k, v in os.environ.items() if k not in DEVICE_ENVIRONMENT_VARIABLES}
    python_path = [str(REPO_ROOT)] + [p for p in environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    environment["PYTHONPATH"] = os.pathsep.join(python_path)
    environment.update(env or {})
    return environment


def run_python_process(code, env=None):
    """Runs ``code`` with ``sys.executable -c`` and returns the CompletedProcess.

    ``code`` is dedented, so tests can write it as an indented triple-quoted
    string. Use this when the exit status itself is under test; otherwise use
    :func:`run_python`.
    """
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=subprocess_environment(env),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_S,
    )


def run_python(code, env=None):
    """Runs ``code`` in a fresh interpreter and returns its stdout.

    Fails the calling test, showing the script's stderr, if it exits non-zero.
    """
    completed = run_python_process(code, env)
    if completed.returncode != 0:
        pytest.fail(
            f"subprocess exited with status {completed.returncode}\n"
            f"--- stdout ---\n{completed.stdout}\n--- stderr ---\n{completed.stderr}",
            pytrace=False,
        )
    return completed.stdout


def last_line(stdout):
    """The last non-empty line a subprocess printed (its result, by convention)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert lines, "the subprocess printed nothing"
    return lines[-1]
