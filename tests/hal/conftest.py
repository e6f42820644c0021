"""Shared fixtures for the HAL tests: recorded vendor-API replays and the ``gpu`` marker."""

import importlib.util
from pathlib import Path

import pytest

_REPLAY_PATH = Path(__file__).resolve().parent / "recorded" / "replay.py"


def _load_replay():
    # Loaded by path: tests/ is not a package, and this keeps the fakes out of sys.path.
    spec = importlib.util.spec_from_file_location("hal_recorded_replay", _REPLAY_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


replay_module = _load_replay()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a real NVIDIA GPU with its driver; skipped elsewhere"
    )


@pytest.fixture
def replay():
    """tests/hal/recorded/replay.py: fakes replaying recorded vendor-API output."""
    return replay_module


@pytest.fixture
def recorded_h200_nvml(replay):
    """pynvml replaying a real 2x H200 (NVLink) machine, recorded by record_nvml.py."""
    return replay.RecordedNvml(replay.load("nvml_h200_x2_nvlink.json"))
