"""The adapter registry: built-in adapters by name, out-of-tree ones by entry point, and
the HAL's vendor tables derived from the adapters' class attributes.

The plug-in tests install a real (tiny) distribution: a directory holding a module and
its ``.dist-info/entry_points.txt``, put on ``sys.path`` of a fresh interpreter.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from kernel_pytorch.hardware_abstraction import HardwareVendor, registry
from kernel_pytorch.hardware_abstraction.backends import BACKEND_PRIORITY, BackendPreference
from kernel_pytorch.hardware_abstraction.placement import process_group_backend_for
from kernel_pytorch.hardware_abstraction.vendor_adapters import CpuAdapter, CustomAsicAdapter, NvidiaAdapter

REPO_ROOT = Path(__file__).resolve().parents[2]

# A chip team's adapter for its PrivateUse1 chip; its device is a fake at the hardware boundary.
ACME_MODULE = '''
import torch
from kernel_pytorch.hardware_abstraction import DeviceSpec, HardwareCapabilities, HardwareVendor, VendorAdapter

class AcmeAdapter(VendorAdapter):
    vendor = HardwareVendor.CUSTOM_ASIC
    device_type, backend, process_group_backend = "acme", "acme", "acmeccl"
    aliases = ("acme", "acme_npu")
    priority = 95

    def discover_devices(self):
        caps = HardwareCapabilities("Acme NPU (fake)", HardwareVendor.CUSTOM_ASIC, "acme-1", None,
                                    64.0, 60.0, 8, 1000.0, {"bf16": 400.0})
        return [DeviceSpec(HardwareVendor.CUSTOM_ASIC, 0, torch.device("cpu"), caps, torch_usable=False)]
'''


def install_distribution(root: Path, entry_points: str, module: str = ACME_MODULE) -> Path:
    (root / "acme_hal.py").write_text(module)
    info = root / "acme_hal-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-hal\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\n{entry_points}\n")
    return root


def run_with(site: Path, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(site)]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=site, env=env, timeout=120)


def test_built_in_adapters_load_by_name_vendor_or_alias():
    assert registry.adapter_class("nvidia") is NvidiaAdapter
    assert registry.adapter_class("CUDA") is NvidiaAdapter
    assert registry.adapter_class("my_asic") is CustomAsicAdapter
    with pytest.raises(ValueError, match="no HAL adapter named 'tpu'; registered: nvidia, amd"):
        registry.adapter_class("tpu")


def test_every_vendor_has_one_adapter_and_the_cpu_comes_last():
    classes = registry.adapter_classes()
    assert sorted(cls.vendor.value for cls in classes) == sorted(v.value for v in HardwareVendor)
    assert classes[-1] is CpuAdapter
    assert [type(a) for a in registry.default_adapters()] == list(classes)


def test_vendor_tables_are_derived_from_the_adapters():
    assert registry.vendor_priority()[0] is HardwareVendor.NVIDIA
    assert [b.adapter_class for b in BACKEND_PRIORITY] == list(registry.adapter_classes())
    assert BackendPreference.parse("hip") is BackendPreference.ROCM
    assert registry.accelerator_device_types() == ("cuda", "xpu", "mps", "my_asic")
    assert process_group_backend_for("my_asic") == "myccl"
    assert process_group_backend_for("cuda") == "nccl"


def test_an_entry_point_adapter_replaces_the_built_in_adapter_of_its_vendor(tmp_path):
    site = install_distribution(tmp_path, "acme = acme_hal:AcmeAdapter")
    result = run_with(site, """
        import acme_hal
        from kernel_pytorch.hardware_abstraction import HardwareAbstractionLayer, HardwareVendor, registry
        from kernel_pytorch.hardware_abstraction.backends import BACKEND_PRIORITY, BackendPreference
        from kernel_pytorch.hardware_abstraction.placement import process_group_backend_for

        assert registry.adapter_class("acme") is acme_hal.AcmeAdapter
        assert registry.adapter_class("custom_asic") is acme_hal.AcmeAdapter
        hal = HardwareAbstractionLayer()
        names = [type(a).__name__ for a in hal.adapters]
        assert names[0] == "AcmeAdapter" and "CustomAsicAdapter" not in names, names
        assert hal.devices[0].name == "Acme NPU (fake)"
        assert HardwareVendor.parse("ACME_NPU") is HardwareVendor.CUSTOM_ASIC
        assert BACKEND_PRIORITY[0] is BackendPreference.parse("acme") is BackendPreference.ACME
        assert process_group_backend_for("acme") == "acmeccl"
        assert registry.accelerator_device_types()[0] == "acme"
        print("ok")
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok"]


def test_a_broken_entry_point_is_skipped_with_a_warning_naming_it(tmp_path):
    site = install_distribution(tmp_path, "broken = acme_hal:NoSuchAdapter")
    result = run_with(site, """
        import warnings
        from kernel_pytorch.hardware_abstraction import HardwareAbstractionLayer, registry
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hal = HardwareAbstractionLayer()
        print(" | ".join(str(w.message) for w in caught if "entry point" in str(w.message)))
        print(registry.adapter_class("custom_asic").__name__)
        print(len(hal.devices) >= 1)
    """)
    assert result.returncode == 0, result.stderr
    warned, adapter, found = result.stdout.strip().split("\n")
    assert "'broken' (acme_hal:NoSuchAdapter) failed to load" in warned
    assert adapter == "CustomAsicAdapter"
    assert found == "True"
