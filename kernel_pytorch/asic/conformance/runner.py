"""Runs a worker of the kit over a list of items in child processes, surviving crashes.

A worker (``python -m kernel_pytorch.asic.conformance.<worker> --items a,b,c ...``)
prints one JSON line per item as soon as it is done: ``{"id": "a", "result": ...}``.
When the process dies (SIGSEGV, abort) or hangs, the first item without a line is
where it happened: that item is recorded as a crash with the end of the child's
stderr, and the remaining items go on in a fresh process. So a crashing runtime fails
the items it crashes on, loudly, and the kit still reports the rest.
"""

import json
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Sequence

from kernel_pytorch.asic.conformance.runtimes import RuntimeUnderTest, python_command

# After this many crashes with no item ever finished, the rest are not run: a
# runtime that cannot even start would otherwise cost one process per item.
MAX_CRASHES_BEFORE_ANY_RESULT = 3


def _tail(text: str, limit: int = 400) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return " | ".join(lines[-4:])[-limit:]


def run_items(
    worker: str,
    items: Sequence[str],
    runtime: RuntimeUnderTest,
    args: Sequence[str] = (),
    timeout_s: float = 600.0,
    progress: Optional[Callable[[str, dict], None]] = None,
    chunk: Optional[int] = None,
    jobs: int = 1,
) -> Dict[str, dict]:
    """``{item id: result dict}`` for every item, crashes and hangs included.

    Args:
        worker: module name of the worker (``kernel_pytorch.asic.conformance.op_db``).
        items: item ids, passed as ``--items a,b,c``.
        runtime: the runtime the child loads (its environment).
        args: further worker arguments.
        timeout_s: seconds one child may run before it is killed (a hang is a crash).
        progress: called with (item id, result) as each result arrives.
        chunk: items per child process (default: all in one, or about two chunks per
            job); a long sweep in chunks keeps each child's time (and timeout_s) bounded.
        jobs: chunks run side by side, each in its own child processes (CPU cores).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1 (got {jobs})")
    items = list(items)
    if jobs > 1:  # about two chunks per job, so one slow chunk does not leave cores idle
        chunk = max(1, min(chunk or len(items), -(-len(items) // (2 * jobs))))
    chunk = chunk or len(items) or 1
    parts = [items[start:start + chunk] for start in range(0, len(items), chunk)]
    lock = threading.Lock()

    def report(item, entry):  # progress callbacks need not be thread-safe: one at a time
        if progress:
            with lock:
                progress(item, entry)

    def run(part):
        return _run_chunk(worker, part, runtime, args, timeout_s, report)

    if jobs == 1 or len(parts) <= 1:
        done = [run(part) for part in parts]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(run, parts))
    results: Dict[str, dict] = {}
    for part in done:
        results.update(part)
    return {item: results[item] for item in items}


def list_items(worker: str, runtime: RuntimeUnderTest) -> List[str]:
    """Every item id ``worker`` knows (``--items all``), listed by a child process."""
    completed = subprocess.run(python_command(worker) + ["--items", "all"], env=runtime.environment(),
                               capture_output=True, text=True, timeout=600)  # fmt: skip
    for line in completed.stdout.splitlines():
        if line.startswith('{"all"'):
            return json.loads(line)["all"]
    raise RuntimeError(f"listing the items of {worker} failed (exit status {completed.returncode}): "
                       f"{completed.stderr.strip()[-500:]}")  # fmt: skip


def _run_chunk(worker, items, runtime, args, timeout_s, progress):
    results: Dict[str, dict] = {}
    pending: List[str] = list(items)
    crashes, any_finished = 0, False
    while pending:
        lines, returncode, stderr, timed_out = _run_child(worker, pending, runtime, args, timeout_s)
        for entry in lines:
            if entry.get("id") in pending and entry["id"] not in results:
                results[entry["id"]] = entry
                any_finished = True
                if progress:
                    progress(entry["id"], entry)
        pending = [item for item in pending if item not in results]
        if not pending:
            break
        # Results arrive in order: the first item without one is where the child died.
        died_in = pending.pop(0)
        why = f"timed out after {timeout_s:.0f} s" if timed_out else f"exit status {returncode}"
        crash = {"id": died_in, "result": f"crash: {why}: {_tail(stderr)}", "crash": True}
        results[died_in] = crash
        if progress:
            progress(died_in, crash)
        crashes += 1
        if not any_finished and crashes >= MAX_CRASHES_BEFORE_ANY_RESULT and pending:
            for item in pending:
                results[item] = {
                    "id": item, "crash": True,
                    "result": f"not run: the worker crashed {crashes} times without finishing any item (last: {crash['result'][:200]})",
                }  # fmt: skip
            break
    return results


def _run_child(worker, items, runtime, args, timeout_s):
    command = python_command(worker) + ["--items", ",".join(items), *args]
    with tempfile.TemporaryDirectory(prefix="kp-conformance-") as cwd:
        process = subprocess.Popen(
            command, cwd=cwd, env=runtime.environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        timed_out = False
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
            timed_out = True
    lines = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by the crash
                pass
    return lines, process.returncode, stderr, timed_out


def first_line(error: BaseException) -> str:
    """``"TypeName: first line of the message"`` (at most 300 characters)."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first[:300]}"


def emit_all(item_ids) -> None:
    """Prints a worker's answer to ``--items all``: every item id it knows (read by list_items)."""
    print(json.dumps({"all": list(item_ids)}), flush=True)


def emit(item_id: str, result: str, **extra) -> None:
    """Prints a worker's result line for ``item_id`` (flushed, so a later crash keeps it)."""
    print(json.dumps({"id": item_id, "result": result, **extra}), flush=True)
