"""Outputs that the docs quote beside their Python code, and the check that they are current.

Two forms count as a quoted output, both as a reader sees them in a REPL or a script:

* a top-level ``print(...)`` statement with a comment on its line: ``print(y.dtype)  # torch.bfloat16``;
* a top-level bare expression (not a call of ``print``) followed by comment lines that
  show its value, as a REPL would::

      kops.backend_info()
      # {'cpu': 'kernel library, ...',
      #  'my_asic': 'runtime kernels', ...}

``...`` in a quote stands for any text (what depends on the machine); runs of whitespace
compare equal.  Comments on other statements (``dist.init_process_group()  # myccl``) are
explanations, not outputs.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from typing import List

__all__ = ["QuotedOutput", "quoted_outputs", "output_matches", "DRIVER"]


@dataclass(frozen=True)
class QuotedOutput:
    line: int
    """1-based line of the statement within the block."""
    kind: str
    """``"print"``: the text the statement prints; ``"repr"``: ``repr()`` of the expression's value."""
    source: str
    quoted: str


def _is_print(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "print")


def _inline_comment(line: str, end_col: int) -> str:
    rest = line[end_col:].strip()
    return rest[1:].strip() if rest.startswith("#") else ""


def quoted_outputs(code: str) -> List[QuotedOutput]:
    """Every output quoted in ``code`` (a dedented Python block)."""
    lines = code.splitlines()
    found = []
    for node in ast.parse(code).body:
        if not isinstance(node, ast.Expr) or isinstance(node.value, ast.Constant):
            continue
        source = ast.get_source_segment(code, node) or ""
        if _is_print(node):
            comment = _inline_comment(lines[node.end_lineno - 1], node.end_col_offset)
            if comment:
                found.append(QuotedOutput(node.lineno, "print", source, comment))
            continue
        following = []
        for line in lines[node.end_lineno:]:
            stripped = line.strip()
            if not stripped.startswith("#"):
                break
            following.append(stripped[1:].strip())
        if following:
            found.append(QuotedOutput(node.lineno, "repr", source, " ".join(following)))
    return found


def output_matches(quoted: str, actual: str) -> bool:
    """Whether ``actual`` fits ``quoted``: ``...`` matches any text, whitespace is optional
    (a quote may wrap a long output over several comment lines)."""
    pieces = [r"\s*".join(re.escape(token) for token in piece.split()) for piece in quoted.split("...")]
    return re.fullmatch(r"\s*" + ".*?".join(pieces) + r"\s*", actual, re.DOTALL) is not None


# Runs a block statement by statement in one namespace (as `python -c` would run it) and
# writes what each quoted statement printed or evaluated to, as JSON, to argv[2].
DRIVER = textwrap.dedent(r'''
    import ast, contextlib, io, json, sys
    code = open(sys.argv[1]).read()
    wanted = {int(line): kind for line, kind in json.loads(sys.argv[3]).items()}
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    actual = {}
    for node in ast.parse(code).body:
        kind = wanted.get(node.lineno)
        if kind == "repr":
            value = eval(compile(ast.Expression(node.value), "<doc block>", "eval"), namespace)
            actual[node.lineno] = repr(value)
            continue
        module = compile(ast.Module(body=[node], type_ignores=[]), "<doc block>", "exec")
        if kind == "print":
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                exec(module, namespace)
            sys.stdout.write(buffer.getvalue())
            actual[node.lineno] = buffer.getvalue().rstrip("\n")
        else:
            exec(module, namespace)
    with open(sys.argv[2], "w") as out:
        json.dump(actual, out)
''')
