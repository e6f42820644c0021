"""The HAL's modules import each other without a circle.

The graph is read from the source (ast), counting every import statement, function-local
ones included: a circle broken only by a late import is still a circle.
"""

import ast
import os
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Set

HAL_DIR = Path(__file__).resolve().parents[2] / "kernel_pytorch" / "hardware_abstraction"


def import_graph(package_dir: Path, package: str) -> Dict[str, Set[str]]:
    """module -> modules of the package it imports (dotted names; a package is its __init__)."""
    modules = {}
    for path in package_dir.rglob("*.py"):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join([package, *parts])] = (path, is_package)
    graph: Dict[str, Set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                # Importing a.b.c runs a.b's __init__ too, unless the importer is inside a.b.
                while target and target != package:
                    if target in modules and not (name + ".").startswith(target + "."):
                        graph[name].add(target)
                    target = target.rpartition(".")[0]
    for name in graph:
        graph[name].discard(name)
    return graph


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import circle as [a, b, ..., a], or None."""
    state: Dict[str, int] = {}  # 1 on the current path, 2 finished
    path: List[str] = []

    def visit(node: str) -> Optional[List[str]]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_hal_has_no_import_circle():
    graph = import_graph(HAL_DIR, "kernel_pytorch.hardware_abstraction")
    assert "kernel_pytorch.hardware_abstraction.registry" in graph["kernel_pytorch.hardware_abstraction.selection"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_hal_core_is_a_leaf():
    graph = import_graph(HAL_DIR, "kernel_pytorch.hardware_abstraction")
    assert graph["kernel_pytorch.hardware_abstraction.hal_core"] == set()


def test_the_check_finds_a_circle_closed_by_a_function_local_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "core.py": "def late():\n    from .sub import adapter\n",
        "sub/__init__.py": "",
        "sub/adapter.py": "from ..core import late\n",
        "top.py": "from .core import late\nfrom pkg.sub.adapter import x\n",
    }
    for rel, text in files.items():
        (pkg / rel).write_text(textwrap.dedent(text))
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.top"] == {"pkg.core", "pkg.sub", "pkg.sub.adapter"}
    assert find_cycle(graph) in (["pkg.core", "pkg.sub.adapter", "pkg.core"],
                                 ["pkg.sub.adapter", "pkg.core", "pkg.sub.adapter"])
