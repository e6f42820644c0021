"""MemoryMonitor's thresholds, hysteresis and lifecycle, on the CPU (the process's resident memory)."""

import logging

import pytest

from kernel_pytorch.hardware_abstraction import MemoryMonitor, device_memory_usage


def test_cpu_usage_is_the_resident_set_against_physical_memory():
    used, total = device_memory_usage("cpu")
    assert 0 < used < total


def test_thresholds_must_be_ordered_fractions():
    with pytest.raises(ValueError, match="0 < warning <= critical <= 1"):
        MemoryMonitor("cpu", warning=0.96, critical=0.95)


def test_unknown_device_type_is_refused_when_constructed():
    with pytest.raises((ValueError, RuntimeError)):
        MemoryMonitor("meta")


def test_crossing_both_thresholds_at_once_fires_warning_then_critical_once():
    events = []
    monitor = MemoryMonitor("cpu", warning=1e-9, critical=2e-9, on_warning=events.append,
                            on_critical=events.append)
    monitor.check()
    monitor.check()  # still above both: no new callback
    assert [e.level for e in events] == ["warning", "critical"]
    assert events[1].used_bytes > 0 and events[1].peak_bytes >= events[1].used_bytes
    assert events[0].source == "check" and events[0].device == "cpu"


def test_default_handler_logs_through_logging(caplog):
    monitor = MemoryMonitor("cpu", warning=1e-9, critical=1.0)
    with caplog.at_level(logging.WARNING, logger="kernel_pytorch.memory"):
        monitor.check()
    assert any("memory warning" in r.getMessage() for r in caplog.records)


def test_context_manager_runs_the_sampler_and_stops_it():
    events = []
    with MemoryMonitor("cpu", warning=1e-9, critical=1.0, interval_s=0.01, on_warning=events.append) as monitor:
        assert monitor.running
        for _ in range(200):
            if events:
                break
            import time

            time.sleep(0.01)
    assert not monitor.running
    assert [e.source for e in events] == ["timer"]
