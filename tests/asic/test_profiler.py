"""The PyTorch profiler on my_asic.

use_device="my_asic" times every op on the device with runtime events (the
PrivateUse1 profiler stubs, csrc/profiler/profiler.cpp), so key_averages() has
my_asic time. torch.profiler.profile(activities=[CPU, PrivateUse1]) records
the device work itself, kernels and copies per stream, linked to the op that
started it (the Kineto activity profiler, csrc/profiler/profiler_kineto.cpp).
Each case runs in a subprocess so the profiler's own logging on stderr can be
checked too.
"""

import json

import pytest

import kernel_pytorch

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


# --- torch.profiler with ProfilerActivity.PrivateUse1 (device activities) ---

# Built only against a torch with the PrivateUse1 profiler registry (2.13 has
# it; the GPU machine's 2.11 may not).
needs_device_activities = pytest.mark.skipif(
    not kernel_pytorch._C._device_activity_profiler_built(),
    reason="this torch has no PrivateUse1 profiler registry (torch/csrc/profiler/standalone/privateuse1_profiler.h)",
)

# A matmul and an add (native kernels on device memory), copies both ways, and
# a kernel_pytorch op that runs the runtime's own kernel (rms_norm).
DEVICE_WORK = """
import json, sys, torch, kernel_pytorch
import kernel_pytorch.ops as kops
from torch.profiler import ProfilerActivity
ACTIVITIES = {activities}
a = torch.randn(64, 64, device="my_asic")
w = torch.ones(64, device="my_asic")
host = torch.randn(64, 64)
def work():
    b = torch.mm(a, a)
    c = torch.add(b, a)
    d = host.to("my_asic")
    n = kops.rms_norm(d, w)
    return (c + n).cpu()
work()  # warm up outside the profile
with torch.profiler.profile(activities=ACTIVITIES) as prof:
    for _ in range({repeats}):
        work()
{after}
"""

KEY_AVERAGES = """
averages = prof.key_averages()
print(json.dumps({
    "device_us": {e.key: e.device_time_total for e in averages},
    "self_device_us": {e.key: e.self_device_time_total for e in averages},
    "negative": [e.key for e in averages
                 if min(e.cpu_time_total, e.self_cpu_time_total, e.device_time_total, e.self_device_time_total) < 0],
}))
"""

BOTH = "[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]"


def profile_device_work(after, activities=BOTH, repeats=3, env=None):
    code = DEVICE_WORK.format(activities=activities, repeats=repeats, after=after)
    completed = run_python_process(code, env=env)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(last_line(completed.stdout)), completed.stderr


@needs_device_activities
def test_device_activities_give_each_op_its_my_asic_time():
    summary, _ = profile_device_work(KEY_AVERAGES)
    device_us = summary["self_device_us"]
    # Native kernels (mm, add), the runtime's kernel (rms_norm) and the copies
    # in (.to) and out (.cpu()), which belong to the innermost op, _copy_from.
    for op in ("aten::mm", "aten::add", "kernel_pytorch::rms_norm", "aten::_copy_from"):
        assert device_us.get(op, 0) > 0, (op, device_us)
    # The ops around them include it in their totals.
    assert summary["device_us"]["aten::copy_"] >= device_us["aten::_copy_from"] > 0


@needs_device_activities
def test_device_activities_report_nothing_negative():
    summary, _ = profile_device_work(KEY_AVERAGES)
    assert summary["negative"] == []


@needs_device_activities
def test_device_activities_log_no_warnings_or_errors():
    _, stderr = profile_device_work(KEY_AVERAGES)
    lowered = stderr.lower()
    for word in ("warn", "error", "assert", "my_asic"):
        assert word not in lowered, stderr[-3000:]


@needs_device_activities
def test_device_activities_are_reported_as_kernel_rows_per_stream():
    summary, _ = profile_device_work(KEY_AVERAGES)
    kernels = {key for key in summary["device_us"] if key.startswith("my_asic ")}
    assert "my_asic host kernel: aten::mm" in kernels
    assert "my_asic runtime kernel: rms_norm" in kernels
    assert {"Memcpy HtoD (my_asic)", "Memcpy DtoH (my_asic)"} <= set(summary["device_us"])


CHROME_TRACE = """
prof.export_chrome_trace(TRACE)
print(json.dumps(json.load(open(TRACE))["traceEvents"]))
"""


def export_trace(tmp_path, activities=BOTH, env=None):
    trace = tmp_path / "trace.json"
    events, _ = profile_device_work(f"TRACE = {str(trace)!r}" + CHROME_TRACE, activities=activities, env=env)
    return events


@needs_device_activities
def test_chrome_trace_has_my_asic_kernels_and_copies_on_device_rows(tmp_path):
    events = export_trace(tmp_path)
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    names = {e["name"] for e in device}
    assert {"my_asic host kernel: aten::mm", "my_asic runtime kernel: rms_norm",
            "Memcpy HtoD (my_asic)", "Memcpy DtoH (my_asic)"} <= names
    # pid: the my_asic device index; tid: the stream (0, the default stream).
    assert {(e["pid"], e["tid"]) for e in device} == {(0, 0)}
    assert all(e["args"]["device"] == 0 and e["args"]["stream"] == 0 for e in device)
    assert all(e["dur"] >= 0 for e in device)
    memcpy = next(e for e in device if e["name"] == "Memcpy HtoD (my_asic)")
    assert memcpy["args"]["bytes"] == 64 * 64 * 4


@needs_device_activities
def test_chrome_trace_links_device_work_to_the_op_that_started_it(tmp_path):
    events = export_trace(tmp_path)
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op"}
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].endswith("aten::mm")]
    assert kernels
    for kernel in kernels:
        op = ops[kernel["args"]["External id"]]
        assert op["name"] == "aten::mm"
        # Runs inside its op's time span (a native kernel runs as the op runs).
        assert op["ts"] <= kernel["ts"] and kernel["ts"] + kernel["dur"] <= op["ts"] + op["dur"] + 1


@needs_device_activities
def test_chrome_trace_draws_a_flow_from_each_launch_to_its_device_work(tmp_path):
    events = export_trace(tmp_path)
    launches = [e for e in events if e.get("cat") == "privateuse1_runtime"]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert len(launches) == len(device) > 0
    flows = [e for e in events if e.get("cat") == "ac2g"]
    starts = {e["id"] for e in flows if e["ph"] == "s"}
    ends = {e["id"] for e in flows if e["ph"] == "f"}
    assert starts == ends and len(starts) == len(device)


@needs_device_activities
def test_chrome_trace_names_the_my_asic_device_row(tmp_path):
    events = export_trace(tmp_path)
    labels = [e["args"]["labels"] for e in events if e.get("ph") == "M" and e.get("name") == "process_labels"
              and e.get("pid") == 0]
    assert labels and labels[0].startswith("my_asic 0")


@needs_device_activities
def test_work_on_a_side_stream_is_reported_on_that_stream(tmp_path):
    trace = tmp_path / "trace.json"
    code = f"""
import json, torch, kernel_pytorch
from torch.profiler import ProfilerActivity
a = torch.randn(32, 32, device="my_asic")
side = torch.my_asic.Stream()
side.wait_stream(torch.my_asic.current_stream())
with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    with torch.my_asic.stream(side):
        b = torch.mm(a, a)
    torch.my_asic.synchronize()
prof.export_chrome_trace({str(trace)!r})
kernels = [e for e in json.load(open({str(trace)!r}))["traceEvents"] if e.get("cat") == "kernel"]
print(json.dumps({{"tids": sorted({{e["tid"] for e in kernels}}), "side": side.stream_id}}))
"""
    completed = run_python_process(code)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(last_line(completed.stdout))
    assert result["tids"] == [result["side"]] and result["side"] != 0


@needs_device_activities
def test_backward_ops_on_the_autograd_thread_get_device_time():
    body = """
model[0].weight.requires_grad_(True)
start = time.perf_counter()
with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    model(x).sum().backward()
elapsed = time.perf_counter() - start
"""
    completed = run_python_process(MODEL_RUN + body + """
averages = prof.key_averages()
print(json.dumps({e.key: e.device_time_total for e in averages if "Backward" in e.key}))
""")
    assert completed.returncode == 0, completed.stderr[-3000:]
    backward = json.loads(last_line(completed.stdout))
    assert backward and sum(backward.values()) > 0, backward


@needs_device_activities
def test_copies_are_device_activities_when_memory_is_not_host_addressable():
    # Every op then runs through the CPU fallback: its device work is the copies.
    summary, _ = profile_device_work(KEY_AVERAGES, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    assert summary["device_us"].get("Memcpy HtoD (my_asic)", 0) > 0
    assert summary["device_us"].get("Memcpy DtoH (my_asic)", 0) > 0
    assert summary["negative"] == []


def test_cpu_only_profiling_records_no_device_activity():
    summary, _ = profile_device_work(KEY_AVERAGES, activities="[ProfilerActivity.CPU]")
    assert "aten::mm" in summary["device_us"]
    assert not any(key.startswith(("my_asic ", "Memcpy")) for key in summary["device_us"])
    assert sum(summary["device_us"].values()) == 0


@needs_device_activities
def test_consecutive_profiles_each_record_their_own_device_work():
    after = """
with torch.profiler.profile(activities=ACTIVITIES) as second:
    work()
counts = [sum(e.count for e in p.key_averages() if e.key == "my_asic host kernel: aten::mm") for p in (prof, second)]
print(json.dumps(counts))
"""
    counts, _ = profile_device_work(after, repeats=3)
    assert counts == [3, 1]
