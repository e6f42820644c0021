"""Every Python block in README.md and docs/*.md runs as written.

Each block runs alone in a fresh interpreter, from a directory outside the repository, as a
reader pasting it would run it.  A block that is a fragment by design (it continues code
shown elsewhere, or needs hardware this machine may lack) is preceded by the marker line

    <!-- snippet: fragment, <why> -->

and is reported as skipped with that reason.

Outputs a block quotes beside its code (``print(y.dtype)  # torch.bfloat16``, or a REPL-style
value in comment lines under an expression; see quoted_outputs.py) are compared with what
the block prints when it runs, so a quote cannot go stale while the code changes.
"""

import glob
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from quoted_outputs import DRIVER, output_matches, quoted_outputs

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
    quotes = quoted_outputs(code)
    if not quotes:
        result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=180)
        assert result.returncode == 0, f"block failed:\n{code}\nstderr:\n{result.stderr[-3000:]}"
        return
    actual = run_with_quotes(code, quotes, tmp_path)
    stale = [f"line {q.line}: {q.source}\n  quoted: {q.quoted}\n  actual: {actual[str(q.line)]}"
             for q in quotes if not output_matches(q.quoted, actual[str(q.line)])]
    assert not stale, "the block quotes outputs the code no longer gives:\n" + "\n".join(stale)


def run_with_quotes(code, quotes, tmp_path):
    """Runs ``code`` in a fresh interpreter; returns {line: what each quoted statement printed or evaluated to}."""
    (tmp_path / "block.py").write_text(code)
    (tmp_path / "driver.py").write_text(DRIVER)
    wanted = json.dumps({q.line: q.kind for q in quotes})
    result = subprocess.run([sys.executable, "driver.py", "block.py", "actual.json", wanted], cwd=tmp_path,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"block failed:\n{code}\nstderr:\n{result.stderr[-3000:]}"
    return json.loads((tmp_path / "actual.json").read_text())


def test_quoted_outputs_are_found_in_both_forms():
    code = "x = 2\nprint(x + 1)  # 3\nx * 10\n# 20\nx.bit_length()  # a method, not an output\n"
    quotes = quoted_outputs(code)
    assert [(q.line, q.kind, q.source, q.quoted) for q in quotes] == [
        (2, "print", "print(x + 1)", "3"), (3, "repr", "x * 10", "20")]


def test_a_stale_quote_is_reported(tmp_path):
    code = "import math\nprint(math.floor(2.5))  # 3\n{'a': 1, 'b': 'x' * 3}\n# {'a': 1,\n#  'b': 'xx'}\n"
    actual = run_with_quotes(code, quoted_outputs(code), tmp_path)
    assert actual == {"2": "2", "3": "{'a': 1, 'b': 'xxx'}"}
    assert not output_matches("3", actual["2"])
    assert not output_matches("{'a': 1,  'b': 'xx'}", actual["3"])
    assert output_matches("{'a': 1,\n 'b': 'xxx'}", actual["3"])


def test_an_ellipsis_in_a_quote_stands_for_any_text():
    assert output_matches("kernel library, ... (best on this CPU: ...)", "kernel library, avx2 (best on this CPU: avx2)")
    assert not output_matches("not built: ...", "built for sm_90 (nvcc 13.0)")
