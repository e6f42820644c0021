"""One translation unit per CPU kernel family, so an edit of one family rebuilds only it.

Each family header of csrc/kernels/cpu (rms_norm.h, silu.h, ...) is compiled through one unit,
csrc/kernels/cpu/per_isa/<family>.cpp, which build_support/native.py compiles once per ISA level.
That unit includes its family header and nothing else, no other file includes a family header,
and a header holding per-level code (namespace kp::cpu::KP_CPU_CAPABILITY) is either a family or
part of what every family shares (reached from common.h).
"""

import re
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parents[2] / "csrc"
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
PER_LEVEL_CODE = re.compile(r"^namespace kp::cpu::KP_CPU_CAPABILITY\b", re.M)


def includes(path):
    return INCLUDE.findall(path.read_text(errors="replace"))


def shared_headers(cpu):
    """The kernels/cpu headers common.h reaches: what every family shares."""
    seen, todo = set(), ["kernels/cpu/common.h"]
    while todo:
        rel = todo.pop()
        if rel not in seen and (cpu.parent.parent / rel).is_file():
            seen.add(rel)
            todo.extend(includes(cpu.parent.parent / rel))
    return seen


def family_violations(csrc):
    """One message per break of the one-unit-per-family rule in the csrc/ tree at `csrc`."""
    cpu = csrc / "kernels" / "cpu"
    units = sorted((cpu / "per_isa").glob("*.cpp"))
    families = {f"kernels/cpu/{unit.stem}.h" for unit in units}
    found = []
    for unit in units:
        own = f"kernels/cpu/{unit.stem}.h"
        if includes(unit) != [own]:
            found.append(f"csrc/kernels/cpu/per_isa/{unit.name}: includes {includes(unit)}, not only {own}")
        if not (csrc / own).is_file():
            found.append(f"csrc/kernels/cpu/per_isa/{unit.name}: no family header {own}")
    for path in sorted(csrc.rglob("*")):
        if path.is_file() and path.parent != cpu / "per_isa":
            rel = path.relative_to(csrc).as_posix()
            for inc in includes(path) if path.suffix in (".h", ".cpp", ".cu", ".cuh") else []:
                if inc in families:
                    found.append(f"csrc/{rel}: includes family header {inc} (only per_isa/{Path(inc).stem}.cpp may)")
    shared = shared_headers(cpu)
    for header in sorted(cpu.glob("*.h")):
        rel = f"kernels/cpu/{header.name}"
        if PER_LEVEL_CODE.search(header.read_text()) and rel not in families and rel not in shared:
            found.append(f"csrc/{rel}: per-level kernel code without a unit (add per_isa/{header.stem}.cpp)")
    return found


def test_each_kernel_family_has_one_unit_that_includes_only_it():
    assert family_violations(CSRC) == []


# The check itself must be able to fail: a synthetic kernel library with each kind of break.


def write(root, rel, text=""):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


LEVEL_NS = "namespace kp::cpu::KP_CPU_CAPABILITY {\n}\n"


@pytest.fixture
def tree(tmp_path):
    write(tmp_path, "kernels/cpu/vec.h", LEVEL_NS)
    write(tmp_path, "kernels/cpu/common.h", '#include "kernels/cpu/vec.h"\n' + LEVEL_NS)
    for family in ("norm", "act"):
        write(tmp_path, f"kernels/cpu/{family}.h", '#include "kernels/cpu/common.h"\n' + LEVEL_NS)
        write(tmp_path, f"kernels/cpu/per_isa/{family}.cpp", f'#include "kernels/cpu/{family}.h"\n')
    write(tmp_path, "kernels/cpu/isa.cpp", '#include "kernels/cpu/dispatch.h"\n')
    return tmp_path


def test_a_clean_library_passes(tree):
    assert family_violations(tree) == []


def test_a_unit_of_several_families_is_caught(tree):
    write(tree, "kernels/cpu/per_isa/norm.cpp", '#include "kernels/cpu/norm.h"\n#include "kernels/cpu/act.h"\n')
    assert family_violations(tree) == [
        "csrc/kernels/cpu/per_isa/norm.cpp: includes ['kernels/cpu/norm.h', 'kernels/cpu/act.h'], not only kernels/cpu/norm.h"
    ]


def test_a_family_including_another_is_caught(tree):
    write(tree, "kernels/cpu/act.h", '#include "kernels/cpu/norm.h"\n' + LEVEL_NS)
    assert family_violations(tree) == [
        "csrc/kernels/cpu/act.h: includes family header kernels/cpu/norm.h (only per_isa/norm.cpp may)"
    ]


def test_an_aggregate_header_of_all_families_is_caught(tree):
    write(tree, "kernels/cpu/kernels_impl.h", '#include "kernels/cpu/act.h"\n#include "kernels/cpu/norm.h"\n')
    assert family_violations(tree) == [
        "csrc/kernels/cpu/kernels_impl.h: includes family header kernels/cpu/act.h (only per_isa/act.cpp may)",
        "csrc/kernels/cpu/kernels_impl.h: includes family header kernels/cpu/norm.h (only per_isa/norm.cpp may)",
    ]


def test_a_family_header_without_a_unit_is_caught(tree):
    write(tree, "kernels/cpu/rope.h", '#include "kernels/cpu/common.h"\n' + LEVEL_NS)
    assert family_violations(tree) == [
        "csrc/kernels/cpu/rope.h: per-level kernel code without a unit (add per_isa/rope.cpp)"
    ]


def test_a_unit_without_its_header_is_caught(tree):
    write(tree, "kernels/cpu/per_isa/gone.cpp", '#include "kernels/cpu/gone.h"\n')
    assert family_violations(tree) == ["csrc/kernels/cpu/per_isa/gone.cpp: no family header kernels/cpu/gone.h"]
