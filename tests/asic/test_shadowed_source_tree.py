"""A kernel_pytorch without its compiled extension (e.g. the source tree shadowing the
installed package) must explain itself and never break ``import torch``."""

import importlib.metadata
import os
import shutil
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def source_tree_without_extension(tmp_path):
    """A copy of the Python sources only, as a fresh clone has before it is built."""
    shutil.copytree(os.path.join(REPO_ROOT, "kernel_pytorch"), tmp_path / "kernel_pytorch",
                    ignore=shutil.ignore_patterns("*.so", "lib", "__pycache__"))
    return tmp_path


def _installed_package_paths():
    """This interpreter's import path without the source tree: where torch and the other
    installed packages live (a virtual environment's system site-packages included)."""
    root = os.path.realpath(REPO_ROOT)
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != root]


# An editable install's finder (installed by a .pth file) would lend the copy the real
# package's _C; a regular install has no such finder.  -S skips .pth files (and with them
# site's own additions), and this process's package directories are then added by hand,
# so the copy meets a regular install wherever torch is installed.
_AS_REGULAR_INSTALL = f"import sys; sys.path.extend({_installed_package_paths()!r})\n"


def _run(code, cwd):
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run([sys.executable, "-S", "-c", _AS_REGULAR_INSTALL + code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def _autoload_entry_point_installed():
    return any(ep.value.startswith("kernel_pytorch") for ep in importlib.metadata.entry_points(group="torch.backends"))


@pytest.mark.skipif(not _autoload_entry_point_installed(),
                    reason="kernel_pytorch's torch.backends entry point is not installed (pip install -e .)")
def test_import_torch_survives_a_shadowing_source_tree_and_says_what_to_do(source_tree_without_extension):
    result = _run("import torch; print(torch.ones(2).sum().item())", source_tree_without_extension)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "2.0"
    assert "has no compiled extension" in result.stderr
    assert "python -P" in result.stderr or "make setup" in result.stderr


def test_import_kernel_pytorch_without_extension_warns_and_keeps_the_hal(source_tree_without_extension):
    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "import kernel_pytorch\n"
        "from kernel_pytorch.hardware_abstraction import HardwareAbstractionLayer\n"
        "print(sorted({s.vendor.value for s in HardwareAbstractionLayer().devices}))\n"
        "try:\n"
        "    kernel_pytorch.enable_my_asic()\n"
        "except ImportError as error:\n"
        "    print('ImportError:', error)\n"
    )
    result = _run(code, source_tree_without_extension)
    assert result.returncode == 0, result.stderr
    assert "'cpu'" in result.stdout
    assert "ImportError: kernel_pytorch was imported from" in result.stdout
    assert "RuntimeWarning" in result.stderr and "my_asic device is not registered" in result.stderr


def test_importing_the_device_modules_without_extension_names_the_fix(source_tree_without_extension):
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "try:\n"
        "    import kernel_pytorch.asic.custom_device\n"
        "except ImportError as error:\n"
        "    print('ImportError:', error)\n"
    )
    result = _run(code, source_tree_without_extension)
    assert result.returncode == 0, result.stderr
    assert "ImportError: kernel_pytorch.asic (the my_asic device) needs the compiled extension." in result.stdout
    assert "has no compiled extension" in result.stdout and "make setup" in result.stdout
    assert "cannot import name" not in result.stdout
