"""register_custom_device: plugging a device runtime in through the kpdr ABI.

Each test runs in a fresh interpreter: the runtime is chosen once per process.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_RUNTIME_SOURCE = os.path.join(REPO, "tests", "runtime", "tiny_runtime", "tiny_runtime.c")
HOST_RAM_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")

BACKEND = """
import torch, kernel_pytorch
from kernel_pytorch.hardware_abstraction.hal_core import HardwareVendor
from kernel_pytorch.asic.custom_device import (
    CustomDeviceBackend, PrivateUse1Config, register_custom_device)

class MyCustomBackend(CustomDeviceBackend):
    def initialize_device(self, device_id: int) -> bool: return True
    def get_device_count(self) -> int: return 4
    def get_device_properties(self, device_id: int): return {"name": f"MyASIC-{device_id}", "memory": 1024}
    def allocate_memory(self, size: int, device_id: int): pass
    def copy_to_device(self, tensor, device_id: int): return tensor
"""


def run(code: str, env=None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    # These tests are about the device itself: register it even beside a GPU.
    full_env.setdefault("MY_ASIC_ENABLE", "1")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=full_env
    )


def run_ok(code: str, env=None) -> str:
    result = run(code, env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_issue_example_registers_four_devices_with_32768_mb_each_when_overcommit_is_explicit():
    result = run(BACKEND + """
class IssueExample(MyCustomBackend):
    def get_device_properties(self, device_id: int): return {"name": f"MyASIC-{device_id}", "memory": 32768}
backend = IssueExample("my_asic", HardwareVendor.CUSTOM_ASIC)
config = PrivateUse1Config(device_name="my_asic", vendor=HardwareVendor.CUSTOM_ASIC,
                           backend_library="libmyasic.so", enable_autograd=True, enable_compilation=True,
                           runtime_options={"overcommit": "1"})
success = register_custom_device(backend, config)
print(success, torch.my_asic.device_count(), torch.my_asic.get_device_name(2),
      torch.my_asic.get_device_properties(3).total_memory)
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "4", "MyASIC-2", str(32768 * 2**20)]
    if 4 * 32768 * 2**20 > HOST_RAM_BYTES:  # said where the user sees it
        assert "libmyasic: overcommit=1: 4 simulated device(s) of 32.00 GiB hold 128.00 GiB" in result.stderr


def test_simulated_devices_larger_than_the_host_are_refused_naming_the_fix():
    per_device_mb = HOST_RAM_BYTES // 2**20 // 2 + 1024  # two of them exceed the host
    out = run_ok(BACKEND + f"""
class Large(MyCustomBackend):
    def get_device_count(self): return 2
    def get_device_properties(self, device_id): return {{"name": f"L-{{device_id}}", "memory": {per_device_mb}}}
class Fitting(MyCustomBackend):
    def get_device_count(self): return 2
    def get_device_properties(self, device_id): return {{"name": f"F-{{device_id}}", "memory": 256}}
try:
    register_custom_device(Large("my_asic"), PrivateUse1Config())
    print("accepted")
except ValueError as error:
    print(error)
register_custom_device(Fitting("my_asic"), PrivateUse1Config())  # nothing was initialised: retry works
print(torch.my_asic.get_device_name(1), torch.ones(2, device="my_asic:1").sum().item())
""")
    refusal, retry = out.strip().rsplit("\n", 1)
    assert "Large describes 2 device(s) of" in refusal and "more memory than this host can back" in refusal
    assert "runtime_options={'overcommit': '1'}" in refusal
    assert "Lower memory_mb to at most" in refusal  # the runtime's own figure
    assert retry == "F-1 2.0"


def test_the_old_hardware_abstraction_import_path_still_works():
    out = run_ok("""
import kernel_pytorch.asic.custom_device as new
import kernel_pytorch.hardware_abstraction.privateuse1_integration as old
print(all(getattr(old, name) is getattr(new, name) for name in new.__all__))
""")
    assert out.split() == ["True"]


def test_registered_capacity_is_enforced():
    out = run_ok(BACKEND + """
class Small(MyCustomBackend):
    def get_device_properties(self, device_id): return {"name": f"S-{device_id}", "memory": 64}
register_custom_device(Small("my_asic"), PrivateUse1Config())
ok = torch.empty(60 << 20, dtype=torch.uint8, device="my_asic:1")
try:
    torch.empty(8 << 20, dtype=torch.uint8, device="my_asic:1")
    print("no error")
except torch.OutOfMemoryError as e:
    print("oom")
""")
    assert out.strip() == "oom"


def test_registering_the_same_backend_twice_is_allowed():
    out = run_ok(BACKEND + """
b = MyCustomBackend("my_asic")
print(register_custom_device(b, PrivateUse1Config()), register_custom_device(b, PrivateUse1Config()))
""")
    assert out.split() == ["True", "True"]


def test_registration_after_the_device_was_initialised_raises():
    result = run(BACKEND + """
torch.ones(1, device="my_asic")
register_custom_device(MyCustomBackend("my_asic"), PrivateUse1Config())
""")
    assert result.returncode != 0
    assert "already initialised" in result.stderr and "before the first use" in result.stderr


def test_a_different_device_name_after_privateuse1_was_renamed_raises():
    result = run(BACKEND + """
register_custom_device(MyCustomBackend("npu"), PrivateUse1Config(device_name="npu"))
""")
    assert result.returncode != 0
    assert "PrivateUse1 is already registered as 'my_asic'" in result.stderr


def test_missing_library_raises_file_not_found_with_the_fix():
    result = run(BACKEND + """
register_custom_device(MyCustomBackend("my_asic"), PrivateUse1Config(backend_library="/nonexistent/libchip.so"))
""")
    assert result.returncode != 0
    assert "FileNotFoundError" in result.stderr and "does not exist" in result.stderr


def test_library_without_the_abi_raises_value_error():
    libc = "libm.so.6"
    result = run(BACKEND + f"""
register_custom_device(MyCustomBackend("my_asic"), PrivateUse1Config(backend_library={libc!r}))
""")
    assert result.returncode != 0
    assert "not a kpdr device runtime" in result.stderr


def test_device_stays_usable_after_a_failed_registration():
    out = run_ok(BACKEND + """
try:
    register_custom_device(MyCustomBackend("my_asic"), PrivateUse1Config(backend_library="/nope/lib.so"))
except FileNotFoundError:
    pass
print(torch.my_asic.device_count(), (torch.ones(3, device="my_asic") * 2).sum().item())
""")
    assert out.split() == ["2", "6.0"]


def test_default_backend_methods_allocate_and_copy_on_the_device():
    out = run_ok("""
import torch, kernel_pytorch
from kernel_pytorch.asic.custom_device import CustomDeviceBackend
class Described(CustomDeviceBackend):
    def initialize_device(self, i): return True
    def get_device_count(self): return 2
    def get_device_properties(self, i): return {"name": f"MyASIC-{i}", "memory": 16384}
b = Described("my_asic")
buf = b.allocate_memory(1024, 1)
t = b.copy_to_device(torch.arange(3), 1)
print(buf.device, buf.numel(), t.device, t.cpu().tolist())
""")
    assert out.split() == ["my_asic:1", "1024", "my_asic:1", "[0,", "1,", "2]"]


@pytest.fixture(scope="module")
def tiny_runtime(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the tiny runtime")
    out = tmp_path_factory.mktemp("tiny") / "libtinychip.so"
    subprocess.run(
        [compiler, "-O2", "-shared", "-fPIC", "-I", os.path.join(REPO, "csrc", "runtime"),
         TINY_RUNTIME_SOURCE, "-lm", "-o", str(out)],
        check=True,
    )
    return str(out)


TINY_BACKEND = """
import torch, kernel_pytorch
from kernel_pytorch.asic.custom_device import (
    CustomDeviceBackend, PrivateUse1Config, register_custom_device)
class TinyBackend(CustomDeviceBackend):
    def initialize_device(self, i): return True
    def get_device_count(self): return 3
    def get_device_properties(self, i): return {"name": f"TinyChip-{i}", "memory": 1024}
"""


def test_a_second_runtime_plugs_in_through_the_abi_alone(tiny_runtime):
    out = run_ok(TINY_BACKEND + f"""
register_custom_device(TinyBackend("my_asic"), PrivateUse1Config(backend_library={tiny_runtime!r}))
names = [torch.my_asic.get_device_name(i) for i in range(torch.my_asic.device_count())]
x = torch.arange(6.0).reshape(2, 3).to("my_asic:2")
y = (x @ x.T).cpu()
print(",".join(names), y.tolist() == (torch.arange(6.0).reshape(2, 3) @ torch.arange(6.0).reshape(2, 3).T).tolist())
""")
    assert out.split() == ["TinyChip-0,TinyChip-1,TinyChip-2", "True"]


def test_a_runtime_brings_its_own_kernel_and_the_rest_falls_back(tiny_runtime):
    # TinyChip's kernel table has a float32 silu only: that call runs on the
    # "chip"; bfloat16 silu (KPDR_ERROR_NOT_SUPPORTED) and rms_norm (absent)
    # run through the counted CPU fallback, with the same results.
    out = run_ok(TINY_BACKEND + f"""
import kernel_pytorch.ops as kops
register_custom_device(TinyBackend("my_asic"), PrivateUse1Config(backend_library={tiny_runtime!r}))
x = torch.randn(4, 10)
torch.my_asic.reset_fallback_stats()
ok = torch.allclose(kops.silu(x.to("my_asic")).cpu(), torch.nn.functional.silu(x), atol=1e-6)
native = dict(torch.my_asic.fallback_stats())
kops.silu(x.to("my_asic", torch.bfloat16))
kops.rms_norm(x.to("my_asic"), torch.ones(10, device="my_asic"))
fell_back = torch.my_asic.fallback_stats()
print(ok, native.get("kernel_pytorch::silu", 0), fell_back.get("kernel_pytorch::silu"),
      fell_back.get("kernel_pytorch::rms_norm"), kops.backend_info()["my_asic"])
""")
    assert out.split()[:4] == ["True", "0", "1", "1"]
    assert "cpu fallback for" in out and "rms_norm" in out


def test_runtime_that_disagrees_with_the_backend_is_reported(tiny_runtime):
    result = run(TINY_BACKEND + f"""
class Wrong(TinyBackend):
    def get_device_count(self): return 5
register_custom_device(Wrong("my_asic"), PrivateUse1Config(backend_library={tiny_runtime!r}))
""")
    assert result.returncode != 0
    assert "reports 3 device(s) but Wrong describes 5" in result.stderr
