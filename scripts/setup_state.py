"""What scripts/setup.sh still has to do, so that a repeated set-up takes seconds.

    python scripts/setup_state.py requirements FILE      exit 0 when FILE's requirements are installed
    python scripts/setup_state.py plan ROOT              print one of: install, build, skip (and why, on stderr)
    python scripts/setup_state.py record ROOT            remember the state just built

Set-up builds the extension in one of three ways:

* ``install``: ``pip install -e .``, the full build.  Needed on a fresh clone, when the
  installed kernel_pytorch is not an editable install of ROOT, when the packaging inputs
  (setup.py, pyproject.toml) or the torch / Python version changed since the last
  recorded build, or when nothing was recorded.
* ``build``: ``python setup.py build_ext --inplace``, the incremental build (ninja
  recompiles only what changed).  Enough when only C++ sources changed or a built file
  is missing: the editable install already points at ROOT.
* ``skip``: nothing changed since the last recorded build.

The record is ``ROOT/build/setup-state.json``: hashes of the packaging inputs and of every
file under csrc/, the torch and Python versions.  Only the standard library is used, and
torch is never imported, so the check costs well under a second.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import json
import os
import re
import sys
from typing import Dict, Optional, Tuple
from urllib.parse import unquote, urlparse

PACKAGING_INPUTS = ("setup.py", "pyproject.toml")
SOURCE_DIR = "csrc"
STATE_FILE = os.path.join("build", "setup-state.json")
BUILT_FILES = ("kernel_pytorch/_C*.so", "kernel_pytorch/lib/libmyasic.so")


def _hash_files(root: str, paths) -> str:
    digest = hashlib.sha256()
    for relative in sorted(paths):
        digest.update(relative.encode() + b"\0")
        with open(os.path.join(root, relative), "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def _installed_version(name: str) -> Optional[str]:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def current_state(root: str) -> Dict[str, Optional[str]]:
    """Fingerprint of everything a build of ROOT depends on."""
    sources = [os.path.relpath(p, root) for p in glob.glob(os.path.join(root, SOURCE_DIR, "**", "*"), recursive=True)
               if os.path.isfile(p)]
    return {
        "packaging": _hash_files(root, [p for p in PACKAGING_INPUTS if os.path.exists(os.path.join(root, p))]),
        "sources": _hash_files(root, sources),
        "torch": _installed_version("torch"),
        "python": sys.version.split()[0],
    }


def editable_install_root() -> Optional[str]:
    """The project directory of an editable kernel_pytorch install, else None."""
    try:
        dist = importlib.metadata.distribution("kernel_pytorch")
    except importlib.metadata.PackageNotFoundError:
        return None
    direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
    if not direct_url.get("dir_info", {}).get("editable"):
        return None
    return os.path.realpath(unquote(urlparse(direct_url["url"]).path))


def built_files_present(root: str) -> bool:
    return all(glob.glob(os.path.join(root, pattern)) for pattern in BUILT_FILES)


def decide(recorded: Optional[Dict], current: Dict, installed_root: Optional[str], root: str,
           built: bool) -> Tuple[str, str]:
    """(action, reason): the pure decision behind ``plan``."""
    if installed_root != os.path.realpath(root):
        where = installed_root or "nowhere (or not editable)"
        return "install", f"kernel_pytorch is installed from {where}, not from {os.path.realpath(root)}"
    if recorded is None:
        return "install", "no record of a previous build"
    for key, what in (("torch", "torch version"), ("python", "Python version"), ("packaging", "setup.py/pyproject.toml")):
        if recorded.get(key) != current[key]:
            return "install", f"{what} changed since the last build"
    if not built:
        return "build", "a built file is missing (" + ", ".join(BUILT_FILES) + ")"
    if recorded.get("sources") != current["sources"]:
        return "build", "C++ sources under csrc/ changed"
    return "skip", "nothing changed since the last build"


def read_record(root: str) -> Optional[Dict]:
    try:
        with open(os.path.join(root, STATE_FILE)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def plan(root: str) -> Tuple[str, str]:
    return decide(read_record(root), current_state(root), editable_install_root(), root, built_files_present(root))


def record(root: str) -> None:
    os.makedirs(os.path.join(root, os.path.dirname(STATE_FILE)), exist_ok=True)
    with open(os.path.join(root, STATE_FILE), "w") as handle:
        json.dump(current_state(root), handle, indent=2)


_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:(==|>=)\s*([0-9][0-9.]*[^\s;#]*))?\s*$")


def _release(version: str) -> Tuple[int, ...]:
    """Leading numeric release of a version ("2.13.0+cpu" -> (2, 13, 0))."""
    parts = []
    for piece in version.split("+")[0].split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def requirements_satisfied(path: str) -> Tuple[bool, str]:
    """Whether every line of a requirements file is installed (``name``, ``name==version``
    or ``name>=version``).

    Anything more elaborate (ranges, markers, URLs, options) counts as unsatisfied, so pip
    decides.
    """
    with open(path) as handle:
        for raw in handle:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            match = _REQUIREMENT.match(line)
            if match is None:
                return False, f"cannot check {line!r} without pip"
            name, operator, wanted = match.groups()
            version = _installed_version(name)
            if version is None:
                return False, f"{name} is not installed"
            if operator == "==" and version.split("+")[0] != wanted.split("+")[0]:
                return False, f"{name} {version} is installed, {wanted} is required"
            if operator == ">=" and _release(version) < _release(wanted):
                return False, f"{name} {version} is installed, >= {wanted} is required"
    return True, "every requirement is installed"


def main(argv) -> int:
    if len(argv) != 3 or argv[1] not in ("requirements", "plan", "record"):
        print(__doc__, file=sys.stderr)
        return 2
    command, target = argv[1], argv[2]
    if command == "requirements":
        ok, reason = requirements_satisfied(target)
        print(reason, file=sys.stderr)
        return 0 if ok else 1
    if command == "plan":
        action, reason = plan(target)
        print(reason, file=sys.stderr)
        print(action)
        return 0
    record(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
