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
) -> Dict[str, dict]:
    """``{item id: result dict}`` for every item, crashes and hangs included.

    Args:
        worker: module name of the worker (``kernel_pytorch.asic.conformance.op_db``).
        items: item ids, passed as ``--items a,b,c``.
        runtime: the runtime the child loads (its environment).
        args: further worker arguments.
        timeout_s: seconds one child may run before it is killed (a hang is a crash).
        progress: called with (item id, result) as each result arrives.
    """
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
    return {item: results[item] for item in items}


def run_chunks(
    worker: str,
    items: Sequence[str],
    runtime: RuntimeUnderTest,
    args: Sequence[str] = (),
    chunk: Optional[int] = None,
    jobs: int = 1,
    timeout_s: float = 600.0,
    progress: Optional[Callable[[str, dict], None]] = None,
) -> Dict[str, dict]:
    """:func:`run_items` over chunks of ``items``, ``jobs`` chunks at a time.

    Each chunk runs in its own child processes (a crash costs only its chunk a fresh
    process); with ``jobs`` > 1 chunks run side by side, on as many CPU cores. ``chunk``
    None: one chunk, or one per job. Returns the results in the order of ``items``.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1 (got {jobs})")
    items = list(items)
    if chunk is None:
        chunk = -(-len(items) // jobs) if items else 1
    parts = [items[start:start + chunk] for start in range(0, len(items), max(1, chunk))]
    lock = threading.Lock()

    def report(item, entry):  # progress callbacks are not thread-safe: one at a time
        if progress:
            with lock:
                progress(item, entry)

    def run(part):
        return run_items(worker, part, runtime, args, timeout_s=timeout_s, progress=report)

    if jobs == 1 or len(parts) <= 1:
        done = [run(part) for part in parts]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            done = list(pool.map(run, parts))
    merged = {item: entry for part in done for item, entry in part.items()}
    return {item: merged[item] for item in items}


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


def emit(item_id: str, result: str, **extra) -> None:
    """Prints a worker's result line for ``item_id`` (flushed, so a later crash keeps it)."""
    print(json.dumps({"id": item_id, "result": result, **extra}), flush=True)
