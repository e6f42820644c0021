"""The kit itself: a crashing or unloadable runtime fails loudly, and the kit still reports.

The broken runtimes here are the tiny test runtime with one function replaced (it
aborts the process), and a file that is not a library at all.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_pytorch.asic.conformance import RuntimeUnderTest, run_conformance

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY_SOURCE_DIR = REPO_ROOT / "tests" / "runtime" / "tiny_runtime"

# The tiny runtime whose kpdrStreamWaitEvent aborts the process (SIGABRT).
ABORTING_WAIT = """
#define kpdrStreamWaitEvent tiny_stream_wait_event_unused
#include "tiny_runtime.c"
#undef kpdrStreamWaitEvent
KPDR_API kpdrError_t kpdrStreamWaitEvent(kpdrStream_t stream, kpdrEvent_t event) {
  (void)stream; (void)event;
  abort();
}
"""


@pytest.fixture(scope="module")
def aborting_runtime(tmp_path_factory):
    directory = tmp_path_factory.mktemp("aborting")
    source = directory / "aborting_wait.c"
    source.write_text(ABORTING_WAIT)
    library = directory / "libaborting.so"
    compiled = subprocess.run(
        ["cc", "-O1", "-shared", "-fPIC", "-pthread", "-I", str(REPO_ROOT / "csrc" / "runtime"),
         "-I", str(TINY_SOURCE_DIR), str(source), "-lm", "-o", str(library)],
        capture_output=True, text=True,
    )  # fmt: skip
    if compiled.returncode != 0:
        pytest.skip(f"could not compile the aborting runtime: {compiled.stderr[-300:]}")
    return RuntimeUnderTest("aborting", library)


def kit_command(*args):
    return [sys.executable, "-P", "-m", "kernel_pytorch", "conformance", *args]


def kit_environment():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


@pytest.fixture(scope="module")
def aborting_run(aborting_runtime, tmp_path_factory):
    """The command line's ABI section on the aborting runtime: (CompletedProcess, JSON report)."""
    directory = tmp_path_factory.mktemp("aborting-run")
    out = directory / "report.json"
    completed = subprocess.run(
        kit_command("--runtime", str(aborting_runtime.path), "--sections", "abi", "--json", str(out), "--quiet"),
        capture_output=True, text=True, env=kit_environment(), cwd=directory, timeout=600,
    )  # fmt: skip
    return completed, json.loads(out.read_text()) if out.exists() else None


def test_checks_a_runtime_crashes_in_fail_as_crashes_and_the_others_still_run(aborting_run):
    completed, report = aborting_run
    assert report is not None, completed.stderr
    results = report["sections"]["abi"]["results"]
    assert results["stream_wait_event_orders_work_across_streams"].startswith("crash: exit status -6")
    assert results["waiting_on_a_never_recorded_event_does_not_block"].startswith("crash")
    # Checks after the crashes ran in fresh processes.
    assert results["threads_share_the_runtime"] == "pass"
    assert results["exports_the_abi"] == "pass"
    assert report["sections"]["abi"]["crashes"] >= 3


def test_the_command_line_exits_non_zero_below_the_bar_and_names_the_crashes(aborting_run, aborting_runtime):
    completed, report = aborting_run
    assert completed.returncode == 1, completed.stderr
    assert "BELOW BAR" in completed.stdout
    assert "stream_wait_event_orders_work_across_streams: crash" in completed.stdout
    assert report["ok"] is False
    assert report["runtime"]["path"] == str(aborting_runtime.path)


def test_a_runtime_that_does_not_load_fails_every_section_with_the_reason(tmp_path):
    broken = tmp_path / "libbroken.so"
    broken.write_text("not an ELF file")
    report = run_conformance(RuntimeUnderTest("broken", broken), sections=["abi", "training"])
    assert not report.ok
    assert "error" in report.probe
    assert set(report.sections) == {"abi", "training"}
    assert all(not s.ok for s in report.sections.values())
    assert "did not load" in report.text()


def test_an_unknown_runtime_is_a_usage_error_naming_the_fix(tmp_path):
    completed = subprocess.run(kit_command("--runtime", str(tmp_path / "missing.so")), capture_output=True,
                               text=True, env=kit_environment(), cwd=tmp_path, timeout=300)  # fmt: skip
    assert completed.returncode == 2
    assert "does not exist" in completed.stderr and "missing.so" in completed.stderr


def test_items_run_in_chunks_of_child_processes_and_a_crash_stays_in_its_chunk(aborting_runtime):
    from kernel_pytorch.asic.conformance.runner import run_items

    items = ["exports_the_abi", "stream_wait_event_orders_work_across_streams", "threads_share_the_runtime",
             "error_strings_name_each_code"]
    seen = []
    results = run_items("kernel_pytorch.asic.conformance.abi", items, aborting_runtime, timeout_s=300, chunk=2,
                        progress=lambda item, entry: seen.append(item))  # fmt: skip
    assert list(results) == items and sorted(seen) == sorted(items)
    assert results["stream_wait_event_orders_work_across_streams"]["result"].startswith("crash: exit status -6")
    assert [results[item]["result"] for item in items if "stream" not in item] == ["pass"] * 3


def test_chunks_run_side_by_side_give_every_item_the_result_a_serial_run_gives(aborting_runtime):
    from kernel_pytorch.asic.conformance.abi import CHECKS
    from kernel_pytorch.asic.conformance.runner import run_items

    items = list(CHECKS)
    verdict = lambda entry: entry["result"].split(":")[0]  # noqa: E731  (pass / crash / fail / skip)
    serial = run_items("kernel_pytorch.asic.conformance.abi", items, aborting_runtime, timeout_s=300)
    seen = []
    side_by_side = run_items("kernel_pytorch.asic.conformance.abi", items, aborting_runtime, timeout_s=300, chunk=5,
                             jobs=3, progress=lambda item, entry: seen.append(item))  # fmt: skip
    assert list(side_by_side) == items and sorted(seen) == sorted(items)
    assert {i: verdict(e) for i, e in side_by_side.items()} == {i: verdict(e) for i, e in serial.items()}
    assert verdict(side_by_side["stream_wait_event_orders_work_across_streams"]) == "crash"
