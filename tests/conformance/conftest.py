"""Which runtimes the conformance kit runs against, as a pytest entry.

Without options, every runtime this checkout can run: the simulator in both memory
modes, the tiny test runtime (compiled here) and the OpenCL runtime where it was built
and an OpenCL platform exists (else that runtime skips, saying why). With
``--kp-runtime PATH_OR_NAME`` (and ``--kp-options``, ``--kp-full``,
``--kp-require-kernels``) only that runtime runs:

    python -m pytest tests/conformance --kp-runtime path/to/libyourchip.so --kp-full -s

At the end the terminal summary lists each runtime's pass rates. The full sweeps of
op_db and module_db per runtime are marked slow (``-m slow``).
"""

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from conformance_results import REPORTS
from kernel_pytorch.asic.conformance import RuntimeNotFound, RuntimeUnderTest, resolve_runtime

REPO_ROOT = Path(__file__).resolve().parents[2]


def pytest_addoption(parser):
    group = parser.getgroup("kernel_pytorch conformance kit")
    group.addoption("--kp-runtime", default=None, help="kpdr runtime to test: a library path, or myasic / opencl")
    group.addoption("--kp-options", default="", help="the runtime's kpdrInit option string")
    group.addoption("--kp-full", action="store_true", help="the whole op_db and module_db sweep")
    group.addoption("--kp-require-kernels", action="store_true", help="fail when a kernel-table op falls back to the CPU")


@dataclass(frozen=True)
class RuntimeConfig:
    """One runtime the suite runs the kit against."""

    key: str  # the test id
    spec: Optional[str]  # name or path for resolve_runtime; None: built by the fixture
    options: str = ""
    require_kernels: bool = False  # every kernel-table op must run on the runtime's own kernels


# The simulator implements all seven kernel-table entries; the tiny runtime only a float32 silu.
BUILT_IN = (
    RuntimeConfig("myasic-host-addressable", "myasic", "host_addressable=1", require_kernels=True),
    RuntimeConfig("myasic-not-host-addressable", "myasic", "host_addressable=0", require_kernels=True),
    RuntimeConfig("tiny", None),
    RuntimeConfig("opencl", "opencl", require_kernels=True),
)


def pytest_generate_tests(metafunc):
    if "runtime_config" not in metafunc.fixturenames:
        return
    config = metafunc.config
    spec = config.getoption("--kp-runtime", default=None)
    if spec:
        configs = [RuntimeConfig("given", spec, config.getoption("--kp-options", default=""),
                                 config.getoption("--kp-require-kernels", default=False))]  # fmt: skip
    else:
        configs = list(BUILT_IN)
    metafunc.parametrize("runtime_config", configs, ids=[c.key for c in configs], scope="session")


@pytest.fixture(scope="session")
def kp_full(request):
    return bool(request.config.getoption("--kp-full", default=False))


def _load_test_module(relative_path):
    """A helper module of another test folder (tests/runtime, tests/opencl), by file path."""
    path = REPO_ROOT / "tests" / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def runtime_under_test(runtime_config, tmp_path_factory):
    """The RuntimeUnderTest of ``runtime_config``; skips (saying why) when it cannot exist here."""
    if runtime_config.spec is None:  # the tiny runtime, compiled from tests/runtime/tiny_runtime
        library = _load_test_module("runtime/runtime_sources.py").build_tiny_runtime(tmp_path_factory.mktemp("tiny") / "libtinychip.so")
        if library is None:
            pytest.skip("no C compiler (cc or gcc) to build the tiny runtime")
        return RuntimeUnderTest("tiny", library, runtime_config.options)
    try:
        runtime = resolve_runtime(runtime_config.spec, runtime_config.options)
    except RuntimeNotFound as error:
        if runtime_config.key == "given":
            raise pytest.UsageError(str(error)) from None
        pytest.skip(str(error))
    if runtime_config.spec == "opencl":
        problem = _load_test_module("opencl/opencl_support.py").opencl_platform_problem()
        if problem:
            pytest.skip(problem)
    return runtime


def pytest_terminal_summary(terminalreporter):
    if not REPORTS:
        return
    terminalreporter.section("kpdr conformance kit: pass rates")
    for key, entry in REPORTS.items():
        cells = [f"{name} {s.passed}/{s.ran}" + ("" if s.ok else " (BELOW BAR)") for name, s in entry["sections"].items()]
        terminalreporter.write_line(f"{entry['label']}: " + ", ".join(cells))


# Variables that configure a runtime or kernel_pytorch's device; the kit's child
# processes start without them, so the developer's shell cannot change results.
DEVICE_ENVIRONMENT_PREFIXES = ("MYASIC_", "MY_ASIC_", "KP_MYASIC_")


@pytest.fixture(scope="session", autouse=True)
def clean_device_environment():
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith(DEVICE_ENVIRONMENT_PREFIXES):
                patch.delenv(name)
        yield


def pytest_collection_modifyitems(config, items):
    """The full sweeps (marked slow) run only when asked for: ``pytest -m slow``."""
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip_slow = pytest.mark.skip(reason="slow: run with -m slow")
    here = Path(__file__).parent
    for item in items:
        if item.path.parent == here and "slow" in item.keywords:
            item.add_marker(skip_slow)
