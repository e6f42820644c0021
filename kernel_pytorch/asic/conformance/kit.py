"""The conformance kit: runs every section against one kpdr runtime and reports.

Sections (each runs in child processes, so a crashing runtime fails its section
loudly and the rest still report):

========================  ===============================================  ==========
section                   what                                             bar
========================  ===============================================  ==========
``abi``                   the C ABI contract (:mod:`.abi`)                 100 %
``op_db forward``         PyTorch's OpInfos, float32, vs the CPU           99 %
``op_db backward``        their input gradients                            98 %
``module_db``             PyTorch's ModuleInfos, float32, vs the CPU       99 %
``training``              a CNN and a tiny Llama, N steps, losses = CPU's  100 %
``kernels``               the kernel-table ops vs the CPU kernel library   100 %
========================  ===============================================  ==========

A section also fails on any crash. The short form (default) runs a representative
subset of op_db and module_db (a few minutes on 2 cores); ``full=True`` runs all of
them. ``require_kernels=True`` additionally fails ``kernels`` when any kernel-table op
fell back to the CPU (``torch.my_asic.fallback_stats()``).
"""

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

from kernel_pytorch.asic.conformance.runtimes import RuntimeUnderTest, python_command

SECTIONS = ("abi", "op_db", "module_db", "training", "kernels")
BARS = {"abi": 1.0, "op_db forward": 0.99, "op_db backward": 0.98, "module_db": 0.99, "training": 1.0, "kernels": 1.0}
SECTION_TIMEOUT_S = 3600.0


@dataclass
class SectionResult:
    """Results of one section: ``{item: "pass" | "fail: ..." | "skip: ..." | "crash: ..."}``."""

    name: str
    results: Dict[str, str]
    bar: float
    seconds: float = 0.0
    extra_failures: List[str] = field(default_factory=list)  # section-level failures (fallbacks, ...)
    error: Optional[str] = None  # the section could not run at all

    @property
    def ran(self) -> int:
        return sum(not r.startswith("skip") for r in self.results.values())

    @property
    def passed(self) -> int:
        return sum(r == "pass" for r in self.results.values())

    @property
    def crashes(self) -> int:
        return sum(r.startswith(("crash", "not run")) for r in self.results.values())

    @property
    def rate(self) -> float:
        return self.passed / self.ran if self.ran else 0.0

    @property
    def ok(self) -> bool:
        return (self.error is None and self.ran > 0 and self.crashes == 0 and self.rate >= self.bar
                and not self.extra_failures)  # fmt: skip

    def failures(self) -> List[str]:
        """``"item: first error line"`` of every item that neither passed nor was skipped."""
        out = [f"{item}: {result}" for item, result in self.results.items() if not result.startswith(("pass", "skip"))]
        return out + self.extra_failures + ([self.error] if self.error else [])

    def to_json(self) -> dict:
        return {"passed": self.passed, "ran": self.ran, "rate": self.rate, "bar": self.bar, "crashes": self.crashes,
                "ok": self.ok, "seconds": round(self.seconds, 1), "error": self.error,
                "extra_failures": self.extra_failures, "results": self.results}  # fmt: skip


@dataclass
class Report:
    """What the kit found for one runtime."""

    runtime: RuntimeUnderTest
    full: bool
    probe: dict
    sections: Dict[str, SectionResult] = field(default_factory=dict)
    kernel_fallback: Dict[str, int] = field(default_factory=dict)  # kernel_pytorch::op -> calls (kernels section)
    training_fallback: Dict[str, int] = field(default_factory=dict)  # op -> calls during device training
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return "error" not in self.probe and bool(self.sections) and all(s.ok for s in self.sections.values())

    def to_json(self) -> dict:
        return {
            "runtime": {"name": self.runtime.name, "path": str(self.runtime.path), "options": self.runtime.options},
            "form": "full" if self.full else "short", "probe": self.probe, "ok": self.ok,
            "seconds": round(self.seconds, 1), "kernel_fallback": self.kernel_fallback,
            "training_fallback": self.training_fallback,
            "sections": {name: s.to_json() for name, s in self.sections.items()},
        }  # fmt: skip

    def text(self, max_failures: int = 40) -> str:
        """The human-readable report: pass rates, fallback counts, failures."""
        lines = [f"kpdr conformance ({'full' if self.full else 'short'} form): {self.runtime.label}",
                 f"  library: {self.runtime.path}"]  # fmt: skip
        if "error" in self.probe:
            lines.append(f"  the runtime did not load: {self.probe['error']}")
        else:
            lines.append(f"  devices: {self.probe['device_count']} ({', '.join(self.probe['names'])}); "
                         f"host_addressable={self.probe['host_addressable']}; kernels: {self.probe['kernels']}")
        lines.append("")
        header = ("section", "passed", "rate", "bar", "crashes", "time", "verdict")
        rows = [header]
        for name, s in self.sections.items():
            rows.append((name, f"{s.passed}/{s.ran}", f"{100 * s.rate:.1f}%", f"{100 * s.bar:.0f}%", str(s.crashes),
                         f"{s.seconds:.0f}s", "ok" if s.ok else "BELOW BAR" if s.error is None else "ERROR"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        if self.kernel_fallback:
            calls = ", ".join(f"{op.split('::')[-1]} {n}" for op, n in sorted(self.kernel_fallback.items()))
            lines.append(f"\n  fallback_stats() of the kernel-table ops (0 = the runtime's kernel ran): {calls}")
        if self.training_fallback:
            top = sorted(self.training_fallback.items(), key=lambda item: -item[1])[:8]
            lines.append("  ops that fell back to the CPU while training: "
                         + ", ".join(f"{op} {n}" for op, n in top)
                         + (f" (+{len(self.training_fallback) - 8} more)" if len(self.training_fallback) > 8 else ""))
        failures = [(name, f) for name, s in self.sections.items() for f in s.failures()]
        if failures:
            lines.append(f"\n  failures ({len(failures)}):")
            lines += [f"    [{name}] {f}" for name, f in failures[:max_failures]]
            if len(failures) > max_failures:
                lines.append(f"    ... {len(failures) - max_failures} more (see --json)")
        lines.append(f"\n  {'PASS' if self.ok else 'FAIL'} in {self.seconds:.0f} s")
        return "\n".join(lines)


class Progress:
    """One status line on stderr per section (rewritten in place on a terminal)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()

    def section(self, name: str, total: int) -> Callable[[str, dict], None]:
        done = [0]

        def update(item, entry):
            done[0] += 1
            if not self.enabled:
                return
            result = entry.get("result") or entry.get("forward", "")
            if self.tty:
                sys.stderr.write(f"\r\033[K{name}: {done[0]}/{total} {item}")
                if done[0] == total:
                    sys.stderr.write("\n")
            elif done[0] == total or result.startswith("crash") or done[0] % max(1, total // 4) == 0:
                sys.stderr.write(f"{name}: {done[0]}/{total}\n")
            sys.stderr.flush()

        return update


PROBE = r"""
import json, torch, kernel_pytorch
from kernel_pytorch import _C
out = {"library": _C._runtime_library()}
try:
    out["device_count"] = torch.my_asic.device_count()
    if out["device_count"] < 1:
        raise RuntimeError("the runtime reports no devices")
    out["names"] = [torch.my_asic.get_device_name(i) for i in range(out["device_count"])]
    out["host_addressable"] = bool(torch.my_asic.get_device_properties(0).host_addressable)
    import kernel_pytorch.ops as kops
    out["kernels"] = kops.backend_info()["my_asic"]
    (torch.ones(4, device="my_asic") + 1).cpu()
except Exception as error:
    out["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
print(json.dumps(out))
"""


_PROBES: Dict[tuple, dict] = {}


def probe(runtime: RuntimeUnderTest) -> dict:
    """Loads the runtime in a child process: devices, names, memory mode, kernels; or the error.

    A successful probe is remembered for the life of this process (one per library and options).
    """
    key = (str(runtime.path), runtime.options)
    if key not in _PROBES:
        result = _probe(runtime)
        if "error" in result:
            return result
        _PROBES[key] = result
    return _PROBES[key]


def _probe(runtime: RuntimeUnderTest) -> dict:
    try:
        completed = subprocess.run(python_command(None) + ["-c", PROBE], env=runtime.environment(),
                                   capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": "loading the runtime took more than 600 s"}
    for line in completed.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)
    tail = " | ".join(completed.stderr.strip().splitlines()[-3:])
    return {"error": f"the probe process died (exit status {completed.returncode}): {tail[-400:]}"}


def run_conformance(
    runtime: RuntimeUnderTest,
    full: bool = False,
    sections: Sequence[str] = SECTIONS,
    steps: int = 20,
    require_kernels: bool = False,
    progress: bool = False,
    jobs: int = 1,
) -> Report:
    """Runs the kit's ``sections`` against ``runtime`` and returns the :class:`Report`.

    Args:
        runtime: the library and option string under test (:func:`.runtimes.resolve_runtime`).
        full: the whole op_db and module_db instead of the representative subsets.
        sections: which of :data:`SECTIONS` to run.
        steps: optimizer steps per training model.
        require_kernels: fail ``kernels`` when a kernel-table op falls back to the CPU.
        progress: print progress lines on stderr.
        jobs: op_db and module_db run this many child processes side by side (CPU cores).
    """
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown section(s) {', '.join(unknown)}: choose from {', '.join(SECTIONS)}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1 (got {steps}): training parity compares each step's loss")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1 (got {jobs}): child processes run side by side")
    started = time.monotonic()
    report = Report(runtime, full, probe(runtime))
    bar = Progress(progress)
    if "error" in report.probe:
        for name in sections:
            for sub in ("op_db forward", "op_db backward") if name == "op_db" else (name,):
                report.sections[sub] = SectionResult(sub, {}, BARS[sub], error="not run: the runtime did not load")
        report.seconds = time.monotonic() - started
        return report
    for name in sections:
        section_started = time.monotonic()
        try:
            produced = _RUNNERS[name](runtime, full, steps, require_kernels, bar, report, jobs)
        except Exception as error:  # the section's own machinery failed: reported, the rest goes on
            subs = ("op_db forward", "op_db backward") if name == "op_db" else (name,)
            produced = [SectionResult(sub, {}, BARS[sub], error=f"{type(error).__name__}: {error}") for sub in subs]
        for section in produced:
            section.seconds = time.monotonic() - section_started
            report.sections[section.name] = section
    report.seconds = time.monotonic() - started
    return report


def _abi(runtime, full, steps, require_kernels, bar, report, jobs):
    from kernel_pytorch.asic.conformance.abi import CHECKS
    from kernel_pytorch.asic.conformance.runner import run_items

    items = list(CHECKS)
    results = run_items("kernel_pytorch.asic.conformance.abi", items, runtime, timeout_s=SECTION_TIMEOUT_S,
                        progress=bar.section("abi", len(items)))  # fmt: skip
    return [SectionResult("abi", {item: entry["result"] for item, entry in results.items()}, BARS["abi"])]


def _op_db(runtime, full, steps, require_kernels, bar, report, jobs):
    from kernel_pytorch.asic.conformance import op_db

    ops = op_db.all_op_ids(runtime) if full else list(op_db.REPRESENTATIVE)
    results = op_db.run_ops(ops, runtime, chunk=60 if full else None, progress=bar.section("op_db", len(ops)),
                            jobs=jobs)  # fmt: skip
    known = op_db.EXPECTED_FAILURES
    sections = []
    for phase in ("forward", "backward"):
        name = f"op_db {phase}"
        phase_results = {}
        for op, entry in results.items():
            result = entry[phase]
            # A failure listed as a harness limitation (not the device's) is not counted.
            if result.startswith("fail") and known.get(op, {}).get(phase):
                result = f"skip: known harness limitation ({known[op][phase]})"
            phase_results[op] = result
        sections.append(SectionResult(name, phase_results, BARS[name]))
    return sections


def _module_db(runtime, full, steps, require_kernels, bar, report, jobs):
    from kernel_pytorch.asic.conformance import module_db

    modules = module_db.all_module_ids(runtime) if full else list(module_db.REPRESENTATIVE)
    results = module_db.run_modules(modules, runtime, inputs=1000 if full else 2, chunk=60 if full else None,
                                    progress=bar.section("module_db", len(modules)), jobs=jobs)  # fmt: skip
    return [SectionResult("module_db", results, BARS["module_db"])]


def _training(runtime, full, steps, require_kernels, bar, report, jobs):
    from kernel_pytorch.asic.conformance.runner import run_items
    from kernel_pytorch.asic.conformance.training import CASES

    items = list(CASES)
    results = run_items("kernel_pytorch.asic.conformance.training", items, runtime, ["--steps", str(steps)],
                        timeout_s=SECTION_TIMEOUT_S, progress=bar.section("training", len(items)))  # fmt: skip
    for entry in results.values():
        for op, calls in (entry.get("fallback") or {}).items():
            report.training_fallback[op] = report.training_fallback.get(op, 0) + calls
    return [SectionResult("training", {item: entry["result"] for item, entry in results.items()}, BARS["training"])]


def _kernels(runtime, full, steps, require_kernels, bar, report, jobs):
    from kernel_pytorch.asic.conformance.kernels import ITEMS
    from kernel_pytorch.asic.conformance.runner import run_items

    results = run_items("kernel_pytorch.asic.conformance.kernels", ITEMS, runtime, timeout_s=SECTION_TIMEOUT_S,
                        progress=bar.section("kernels", len(ITEMS)))  # fmt: skip
    fell_back = []
    for item, entry in results.items():
        op = f"kernel_pytorch::{item.rsplit('.', 1)[0]}"
        calls = entry.get("fallback")
        if calls is not None:
            report.kernel_fallback[op] = report.kernel_fallback.get(op, 0) + calls
            if calls:
                fell_back.append(item)
    section = SectionResult("kernels", {item: entry["result"] for item, entry in results.items()}, BARS["kernels"])
    if require_kernels and fell_back:
        section.extra_failures.append(
            f"fell back to the CPU (the runtime's kernel table lacks or refused them): {', '.join(fell_back)}")
    return [section]


_RUNNERS = {"abi": _abi, "op_db": _op_db, "module_db": _module_db, "training": _training, "kernels": _kernels}
