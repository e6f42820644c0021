"""scripts/setup_state.py: when set-up reinstalls, rebuilds incrementally, or skips."""

import importlib.util
import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("setup_state", os.path.join(REPO_ROOT, "scripts", "setup_state.py"))
setup_state = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(setup_state)


@pytest.fixture
def tree(tmp_path):
    """A project with the inputs setup_state fingerprints."""
    (tmp_path / "setup.py").write_text("# setup\n")
    (tmp_path / "pyproject.toml").write_text("[build-system]\n")
    (tmp_path / "csrc" / "aten").mkdir(parents=True)
    (tmp_path / "csrc" / "aten" / "a.cpp").write_text("int a;\n")
    return tmp_path


def decide(tree, recorded, installed="here", built=True, current=None):
    root = str(tree)
    current = current or setup_state.current_state(root)
    installed_root = os.path.realpath(root) if installed == "here" else installed
    return setup_state.decide(recorded, current, installed_root, root, built)[0]


def test_fresh_clone_gets_the_full_install(tree):
    assert decide(tree, recorded=None, installed=None) == "install"


def test_an_install_from_another_checkout_is_replaced(tree):
    assert decide(tree, setup_state.current_state(str(tree)), installed="/elsewhere/kernel_pytorch") == "install"


def test_without_a_record_the_full_install_runs(tree):
    assert decide(tree, recorded=None) == "install"


def test_nothing_changed_skips(tree):
    assert decide(tree, setup_state.current_state(str(tree))) == "skip"


def test_a_changed_source_rebuilds_incrementally(tree):
    recorded = setup_state.current_state(str(tree))
    (tree / "csrc" / "aten" / "a.cpp").write_text("int a = 1;\n")
    assert decide(tree, recorded) == "build"


def test_a_new_source_file_rebuilds(tree):
    recorded = setup_state.current_state(str(tree))
    (tree / "csrc" / "aten" / "b.h").write_text("#pragma once\n")
    assert decide(tree, recorded) == "build"


def test_a_missing_built_file_rebuilds(tree):
    assert decide(tree, setup_state.current_state(str(tree)), built=False) == "build"


def test_changed_packaging_reinstalls(tree):
    recorded = setup_state.current_state(str(tree))
    (tree / "setup.py").write_text("# setup, new entry point\n")
    assert decide(tree, recorded) == "install"


@pytest.mark.parametrize("key", ["torch", "python"])
def test_another_torch_or_python_reinstalls(tree, key):
    recorded = dict(setup_state.current_state(str(tree)), **{key: "0.0.0"})
    assert decide(tree, recorded) == "install"


def test_record_then_plan_reads_back_the_same_state(tree):
    setup_state.record(str(tree))
    assert setup_state.read_record(str(tree)) == setup_state.current_state(str(tree))


def test_requirements_installed_and_pinned_versions(tmp_path):
    import pytest as installed_pytest

    ok = tmp_path / "ok.txt"
    ok.write_text(f"# comment\npytest=={installed_pytest.__version__}\n\n")
    assert setup_state.requirements_satisfied(str(ok))[0]
    wrong_pin = tmp_path / "pin.txt"
    wrong_pin.write_text("pytest==0.0.1\n")
    assert setup_state.requirements_satisfied(str(wrong_pin)) == (
        False, f"pytest {installed_pytest.__version__} is installed, 0.0.1 is required")
    missing = tmp_path / "missing.txt"
    missing.write_text("surely-not-an-installed-distribution\n")
    assert setup_state.requirements_satisfied(str(missing))[1] == "surely-not-an-installed-distribution is not installed"


def test_minimum_versions_are_checked(tmp_path):
    enough = tmp_path / "enough.txt"
    enough.write_text("pytest>=1.0\n")
    assert setup_state.requirements_satisfied(str(enough))[0]
    too_old = tmp_path / "old.txt"
    too_old.write_text("pytest>=999.0\n")
    assert "pytest" in setup_state.requirements_satisfied(str(too_old))[1]


def test_requirements_it_cannot_judge_are_left_to_pip(tmp_path):
    elaborate = tmp_path / "elaborate.txt"
    elaborate.write_text("torch<3; python_version > '3.9'\n")
    assert setup_state.requirements_satisfied(str(elaborate))[0] is False


def test_setup_sh_dry_run_changes_nothing(tmp_path):
    state = os.path.join(REPO_ROOT, setup_state.STATE_FILE)
    before = os.path.getmtime(state) if os.path.exists(state) else None
    result = subprocess.run(["bash", os.path.join(REPO_ROOT, "scripts", "setup.sh"), "--dry-run"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert ("+ env MAX_JOBS=" in result.stdout) or ("kernel_pytorch: up to date, not rebuilt" in result.stdout)
    assert (os.path.getmtime(state) if os.path.exists(state) else None) == before
