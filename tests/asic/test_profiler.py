"""The PyTorch profiler on my_asic.

use_device="my_asic" times every op on the device with runtime events (the
PrivateUse1 profiler stubs, csrc/aten/profiler.cpp), so key_averages() has
my_asic time. Each case runs in a subprocess so the profiler's own logging on
stderr can be checked too.
"""

import json

from device_subprocess import last_line, run_python_process

MODEL_RUN = """
import json, time, torch, kernel_pytorch
from torch.profiler import ProfilerActivity
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("my_asic")
x = torch.randn(8, 16, device="my_asic")
model(x)  # warm up outside the profile
"""

SUMMARY = """
averages = prof.key_averages()
events = [e for e in averages]
summary = {
    "seconds": elapsed,
    "ops": sorted(e.key for e in events),
    "device_us": sum(e.self_device_time_total for e in events),
    "addmm_device_us": sum(e.self_device_time_total for e in events if e.key == "aten::addmm"),
    "negative": [e.key for e in events
                 if min(e.cpu_time_total, e.self_cpu_time_total, e.device_time_total, e.self_device_time_total) < 0],
    "table_has_my_asic": "MY_ASIC" in averages.table(),
}
print(json.dumps(summary))
"""


def profile(body):
    completed = run_python_process(MODEL_RUN + body + SUMMARY)
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(last_line(completed.stdout)), completed.stderr


USE_DEVICE = """
start = time.perf_counter()
with torch.autograd.profiler.profile(use_device="my_asic") as prof:
    for _ in range(20):
        model(x).sum()
elapsed = time.perf_counter() - start
"""

ACTIVITIES = """
start = time.perf_counter()
with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    for _ in range(20):
        model(x).sum()
elapsed = time.perf_counter() - start
prof.export_chrome_trace(TRACE)
"""


def test_use_device_reports_my_asic_time_per_op():
    summary, _ = profile(USE_DEVICE)
    assert "aten::addmm" in summary["ops"]
    assert summary["addmm_device_us"] > 0
    assert summary["device_us"] > 0
    assert summary["table_has_my_asic"]


def test_use_device_reports_nothing_negative_and_logs_nothing():
    summary, stderr = profile(USE_DEVICE)
    assert summary["negative"] == []
    assert "not enabled" not in stderr
    assert "INTERNAL ASSERT" not in stderr
    assert "my_asic profiler" not in stderr


def test_use_device_twenty_small_forward_passes_take_well_under_a_second():
    # A smoke bound against the 10+ s this took when every op failed and
    # logged; timings proper live in benchmarks/.
    summary, _ = profile(USE_DEVICE)
    assert summary["seconds"] < 3.0


def test_kineto_activities_profile_cleanly_and_export_a_chrome_trace(tmp_path):
    trace = tmp_path / "trace.json"
    summary, stderr = profile(f"TRACE = {str(trace)!r}\n" + ACTIVITIES)
    assert "aten::addmm" in summary["ops"]
    assert summary["negative"] == []
    assert "not enabled" not in stderr and "INTERNAL ASSERT" not in stderr
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::addmm" for e in events)


def test_backward_ops_get_my_asic_time():
    body = """
model[0].weight.requires_grad_(True)
start = time.perf_counter()
with torch.autograd.profiler.profile(use_device="my_asic") as prof:
    model(x).sum().backward()
elapsed = time.perf_counter() - start
"""
    summary, stderr = profile(body)
    assert any("Backward" in op for op in summary["ops"])
    assert summary["device_us"] > 0 and summary["negative"] == []
