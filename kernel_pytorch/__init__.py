"""kernel_pytorch: a PyTorch device extension (``my_asic``) and a Hardware Abstraction Layer.

``import kernel_pytorch`` (or plain ``import torch`` once the package is
installed, through torch's backend autoload) names the PrivateUse1 device
``my_asic`` and registers ``torch.my_asic``. The device runtime loads lazily.
"""

__version__ = "0.1.0"


# Defined before anything imports torch: when ``import kernel_pytorch`` comes
# first, torch's autoload re-enters this half-imported module and looks this
# name up; registration then finishes when the import below returns.
def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: importing us registers my_asic."""


def _installed_package_dir():
    """Where pip installed kernel_pytorch (the project dir for an editable install), if
    that copy has its compiled extension; else None."""
    import glob
    import importlib.metadata
    import json
    import os
    from urllib.parse import unquote, urlparse

    try:
        dist = importlib.metadata.distribution("kernel_pytorch")
        direct_url = json.loads(dist.read_text("direct_url.json") or "{}")
        if direct_url.get("dir_info", {}).get("editable"):
            candidate = os.path.join(unquote(urlparse(direct_url["url"]).path), "kernel_pytorch")
        else:
            candidate = str(dist.locate_file("kernel_pytorch"))
    except Exception:  # no or odd install metadata: only the hint is lost, never the import
        return None
    return candidate if glob.glob(os.path.join(candidate, "_C*.so")) else None


def _missing_extension_message(error: ImportError) -> str:
    """What happened and what to do when this package has no compiled ``_C``."""
    import glob
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    built = glob.glob(os.path.join(here, "_C*.so"))
    if built:
        message = f"kernel_pytorch at {here} could not load its compiled extension {built[0]} ({error}), "
    else:
        message = f"kernel_pytorch was imported from {here}, which has no compiled extension (_C*.so), "
    message += "so the my_asic device is not registered; the hardware abstraction layer still works. "
    installed = _installed_package_dir()
    if installed and os.path.realpath(installed) != os.path.realpath(here):
        return message + (
            f"An installed kernel_pytorch at {installed} is shadowed: Python puts the current "
            f"directory (or PYTHONPATH) first on sys.path, and this looks like the source tree. "
            f"Run Python from another directory or with `python -P`, or build the source tree "
            f"with `make setup` (or in place with `python setup.py build_ext --inplace`)."
        )
    return message + "Build it with `make setup` (or `pip install --no-build-isolation -e .`)."


import torch as _torch  # noqa: E402,F401  (loads libc10/libtorch, which _C links against)

try:
    from kernel_pytorch import _C  # noqa: E402,F401
except ImportError as _error:
    # Never raise here: torch imports this package while `import torch` runs (backend
    # autoload), and an exception would make `import torch` itself fail.
    import warnings as _warnings

    _EXTENSION_PROBLEM = _missing_extension_message(_error)
    _warnings.warn(_EXTENSION_PROBLEM, RuntimeWarning, stacklevel=1)
else:
    _EXTENSION_PROBLEM = None
    from kernel_pytorch.asic.registration import register_device as _register_device  # noqa: E402

    if _register_device():
        from kernel_pytorch.asic.distributed import register_myccl as _register_myccl

        _register_myccl()


def enable_my_asic() -> None:
    """Registers my_asic even though another accelerator (e.g. CUDA) is present.

    See kernel_pytorch.asic.registration.register_device for why that is not
    automatic.

    Raises:
        ImportError: this kernel_pytorch has no compiled extension (the message says why
            and what to do).
    """
    if _EXTENSION_PROBLEM is not None:
        raise ImportError(_EXTENSION_PROBLEM)
    _register_device(force=True)
