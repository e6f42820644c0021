"""Every Python block in README.md and docs/*.md runs as written.

Each block runs alone in a fresh interpreter, from a directory outside the repository, as a
reader pasting it would run it.  A block that is a fragment by design (it continues code
shown elsewhere, or needs hardware this machine may lack) is preceded by the marker line

    <!-- snippet: fragment, <why> -->

and is reported as skipped with that reason.
"""

import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_BLOCK = re.compile(r"(?P<marker><!-- snippet: fragment, (?P<why>[^>]*?) -->\s*\n)?(?P<indent>[ \t]*)```python\n(?P<code>.*?)(?P=indent)```",
                    re.DOTALL)


def python_blocks():
    files = [os.path.join(REPO_ROOT, "README.md")] + sorted(glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))
    for path in files:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("indent")) + 1
            name = f"{os.path.relpath(path, REPO_ROOT)}:{line}"
            yield pytest.param(textwrap.dedent(match.group("code")), match.group("why"), id=name)


BLOCKS = list(python_blocks())


def _my_asic_registered() -> bool:
    import torch

    import kernel_pytorch  # noqa: F401

    return hasattr(torch, "my_asic")


def test_the_docs_have_python_blocks():
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("code, fragment_reason", BLOCKS)
def test_python_block_runs_as_written(code, fragment_reason, tmp_path):
    if fragment_reason:
        pytest.skip(f"fragment by design: {fragment_reason}")
    if "my_asic" in code and not _my_asic_registered():
        pytest.skip("my_asic is not registered in this environment (beside a GPU it needs MY_ASIC_ENABLE=1)")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"block failed:\n{code}\nstderr:\n{result.stderr[-3000:]}"
