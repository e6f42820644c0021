"""The csrc/ layers of docs/architecture.md, enforced on every #include.

Each folder of csrc/ is one layer. A file may include anything of its own
layer, and of another layer only that layer's public header, and only when
its own layer is allowed to include that layer (the table below, which is
the table of docs/architecture.md). A lower layer never includes a higher one.
"""

import os
import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"

# (layer, folder or file under csrc/, public headers, layers it may include),
# lowest first. A folder ends with "/"; the longest match names a file's layer.
LAYERS = [
    ("abi", "runtime/kpdr.h", {"runtime/kpdr.h"}, set()),
    ("kernels", "kernels/", {"kernels/kernels.h", "kernels/cuda/kernels_cuda.h", "kernels/cpu/spin_wait.h"}, {"abi"}),
    ("runtimes", "runtime/", set(), {"abi", "kernels"}),
    ("core", "core/", {"core/core.h"}, {"abi"}),
    ("aten", "aten/", {"aten/aten.h"}, {"abi", "core"}),
    ("profiler", "profiler/", {"profiler/profiler.h"}, {"abi", "core"}),
    ("ops", "ops/", {"ops/ops.h"}, {"abi", "kernels", "core", "aten"}),
    ("distributed", "distributed/", {"distributed/distributed.h"}, {"abi", "core"}),
    ("python", "python/", set(), {"core", "aten", "profiler", "ops", "distributed"}),
]

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".c", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def layer_of(rel, layers=LAYERS):
    """The layer whose folder (or file) holds `rel` (a path under csrc/), or None."""
    matches = [(len(where), name) for name, where, _, _ in layers if rel == where or (where.endswith("/") and rel.startswith(where))]
    return max(matches)[1] if matches else None


def reachable(layer, layers=LAYERS):
    """Every layer `layer` may include, directly or through others."""
    allowed = {name: deps for name, _, _, deps in layers}
    seen, todo = set(), list(allowed[layer])
    while todo:
        dep = todo.pop()
        if dep not in seen:
            seen.add(dep)
            todo.extend(allowed[dep])
    return seen


def resolve(root, rel, target, quoted):
    """The csrc/-relative path an include names (as the compilers' -I csrc and
    the simulator's -I csrc/runtime find it), or None when outside csrc/."""
    bases = ([os.path.dirname(rel)] if quoted else []) + ["", "runtime"]
    for base in bases:
        candidate = os.path.normpath(os.path.join(base, target))
        if not candidate.startswith("..") and (root / candidate).is_file():
            return candidate
    return None


def violations(root, layers=LAYERS):
    """One message per include under `root` (a csrc/ folder) that breaks the
    layering: file, include and rule."""
    public = {name: headers for name, _, headers, _ in layers}
    allowed = {name: deps for name, _, _, deps in layers}
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
            continue
        rel = path.relative_to(root).as_posix()
        src = layer_of(rel, layers)
        if src is None:
            found.append(f"csrc/{rel}: belongs to no layer (add its folder to the layer table)")
            continue
        for quote, target in INCLUDE.findall(path.read_text(errors="replace")):
            inc = resolve(root, rel, target, quote == '"')
            if inc is None:
                if quote == '"':
                    found.append(f'csrc/{rel}: #include "{target}" names no file under csrc/')
                continue
            dst = layer_of(inc, layers)
            if dst == src:
                continue
            where = f'csrc/{rel}: #include "{target}"'
            if src in reachable(dst, layers):
                found.append(f"{where}: lower layer '{src}' includes higher layer '{dst}'")
            elif dst not in allowed[src]:
                found.append(f"{where}: layer '{src}' may not include layer '{dst}' (it may include: {', '.join(sorted(allowed[src])) or 'nothing'})")
            elif inc not in public[dst]:
                found.append(f"{where}: private header of layer '{dst}' (include {' or '.join(sorted(public[dst]))})")
    return found


def test_every_include_respects_the_layers():
    assert violations(CSRC) == []


def test_the_layer_table_is_acyclic():
    for name, _, _, _ in LAYERS:
        assert name not in reachable(name), f"layer '{name}' can reach itself"


def test_docs_architecture_table_is_this_table():
    doc = (CSRC.parent / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| `?(\w+)`? \| `([^`]+)` \| (.*?) \| (.*?) \|$", doc, re.M)
    table = [(n, w, set(re.findall(r"`([^`]+)`", p)), set(re.findall(r"`(\w+)`", d))) for n, w, p, d in rows]
    assert table == LAYERS


# The check itself must be able to fail: a synthetic tree with each kind of break.


def write(root, rel, text=""):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def tree(tmp_path):
    write(tmp_path, "runtime/kpdr.h")
    write(tmp_path, "core/core.h", '#include "runtime/kpdr.h"\n')
    write(tmp_path, "core/streams_impl.h")
    write(tmp_path, "aten/aten.h", '#include "core/core.h"\n')
    write(tmp_path, "python/module.cpp", '#include "aten/aten.h"\n#include "core/core.h"\n')
    return tmp_path


def test_a_clean_tree_passes(tree):
    assert violations(tree) == []


def test_lower_layer_including_a_higher_one_is_caught(tree):
    write(tree, "core/streams.cpp", '#include "aten/aten.h"\n')
    assert violations(tree) == [
        "csrc/core/streams.cpp: #include \"aten/aten.h\": lower layer 'core' includes higher layer 'aten'"
    ]


def test_sibling_layers_may_not_include_each_other(tree):
    write(tree, "profiler/profiler.h")
    write(tree, "aten/copy.cpp", '#include "profiler/profiler.h"\n')
    assert violations(tree) == [
        "csrc/aten/copy.cpp: #include \"profiler/profiler.h\": layer 'aten' may not include layer 'profiler' "
        "(it may include: abi, core)"
    ]


def test_another_layers_private_header_is_caught(tree):
    write(tree, "aten/copy.cpp", '#include "core/streams_impl.h"\n')
    assert violations(tree) == [
        "csrc/aten/copy.cpp: #include \"core/streams_impl.h\": private header of layer 'core' (include core/core.h)"
    ]


def test_relative_and_angle_includes_are_resolved(tree):
    write(tree, "core/x.cpp", '#include "../python/module.cpp"\n#include <aten/aten.h>\n#include <vector>\n')
    assert [v.split(": ", 2)[2] for v in violations(tree)] == [
        "lower layer 'core' includes higher layer 'python'",
        "lower layer 'core' includes higher layer 'aten'",
    ]


def test_unknown_folders_and_missing_headers_are_reported(tree):
    write(tree, "misc/x.cpp", '#include "core/core.h"\n')
    write(tree, "core/y.cpp", '#include "core/gone.h"\n')
    assert violations(tree) == [
        'csrc/core/y.cpp: #include "core/gone.h" names no file under csrc/',
        "csrc/misc/x.cpp: belongs to no layer (add its folder to the layer table)",
    ]
