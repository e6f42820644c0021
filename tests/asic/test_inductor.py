"""torch.compile's default backend (Inductor) on my_asic.

On host-addressable runtimes (the simulator's default) Inductor generates C++
kernels that compute on my_asic memory in place; elsewhere torch.compile runs
the graph with the 'my_asic' backend. Inductor's C++ builds are slow on small
machines: these tests are few, small, and share Inductor's on-disk cache.
"""

import pytest
import torch
import torch.nn.functional as F

from device_subprocess import run_python, run_python_process

pytestmark = pytest.mark.usefixtures("device_count")


def gelu_matmul(x, y):
    return F.gelu(x @ y).sum(-1) * 2 + 1


def test_importing_the_package_imports_neither_dynamo_nor_inductor():
    out = run_python("""
        import sys, kernel_pytorch, torch
        torch.empty(1, device="my_asic")
        print(sorted(m for m in ("torch._dynamo", "torch._inductor") if m in sys.modules))
    """)
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.usefixtures("host_addressable")
def test_inductor_kernels_on_my_asic_match_the_cpu():
    x, y = torch.randn(64, 64), torch.randn(64, 64)
    compiled = torch.compile(gelu_matmul)
    got = compiled(x.to("my_asic"), y.to("my_asic"))
    assert got.device.type == "my_asic"
    torch.testing.assert_close(got.cpu(), compiled(x, y))


@pytest.mark.usefixtures("host_addressable")
def test_dynamo_knows_my_asic_as_a_device():
    from torch._dynamo.device_interface import get_interface_for_device

    interface = get_interface_for_device("my_asic")
    assert interface.device_count() == torch.my_asic.device_count()
    assert interface.current_stream() == torch.my_asic.current_stream()
    assert interface.get_raw_stream(0) == torch.my_asic.current_stream(0).stream_id
    assert interface.is_bf16_supported()


SIDE_STREAM_THEN_COMPILED = """
    import torch, kernel_pytorch
    import kernel_pytorch.ops as kops
    # The side stream's work is asynchronous: a copy from pinned memory (non_blocking)
    # and a runtime kernel (the kernel table's rms_norm). Only the event wait orders it
    # before the compiled function, which reads both results.
    compiled = torch.compile(lambda t, u: (t * 2 + 1).sum(dtype=torch.float64) + u.sum(dtype=torch.float64))
    side = torch.my_asic.Stream()
    main = torch.my_asic.current_stream()
    n = 1 << 20
    t = torch.empty(n, device="my_asic")
    weight = torch.ones(1024, device="my_asic")
    for i in range(100):
        source = torch.full((n,), float(i), pin_memory=True)
        with torch.my_asic.stream(side):
            t.copy_(source, non_blocking=True)
            u = kops.rms_norm(t.view(1024, 1024), weight, 1e-6)
            done = torch.Event(device=torch.device("my_asic"))
            done.record(side)
        main.wait_event(done)
        got = compiled(t, u).item()
        expected = n * (2 * i + 1) + (n if i else 0)  # rms_norm of a constant row: 1 (0 for zeros)
        assert abs(got - expected) <= 1e-3 * n, f"run {i}: {got} != {expected}"
        side.synchronize()  # `source` may be freed now
    print("100/100")
"""


@pytest.mark.parametrize("host_addressable", ["1", "0"], ids=["inductor", "my_asic_backend"])
def test_compiled_function_sees_side_stream_work_after_an_event_wait(host_addressable):
    # In a subprocess: a stream-order bug can crash (a kernel reading freed memory).
    # Host-addressable memory compiles with Inductor; otherwise with the "my_asic" backend.
    out = run_python(SIDE_STREAM_THEN_COMPILED, env={"MY_ASIC_HOST_ADDRESSABLE": host_addressable})
    assert out.strip().splitlines()[-1] == "100/100"


@pytest.mark.usefixtures("host_addressable")
@pytest.mark.parametrize("queries, kernel", [(16, "_scaled_dot_product_flash_attention_for_cpu"),
                                             (1, "_scaled_dot_product_fused_attention_overrideable")],
                         ids=["prefill", "decode"])
def test_attention_in_inductor_graphs_runs_on_the_host_threads_except_decode(queries, kernel):
    # Prefill takes ATen's CPU flash attention on the host's OpenMP threads, as
    # the graph's C++ kernels do; decode keeps the runtime's split-K kernel.
    from torch._inductor.utils import run_and_get_code

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=queries > 1, enable_gqa=True) * 2

    q, k, v = torch.randn(1, 4, queries, 8), torch.randn(1, 2, 16, 8), torch.randn(1, 2, 16, 8)
    with torch.no_grad():
        got, code = run_and_get_code(torch.compile(attend), q.to("my_asic"), k.to("my_asic"), v.to("my_asic"))
    assert f"torch.ops.aten.{kernel}.default(" in code[0]
    torch.testing.assert_close(got.cpu(), attend(q, k, v))


@pytest.mark.usefixtures("host_addressable")
def test_attention_choice_is_part_of_inductor_cache_keys():
    # The kernel is chosen while AOT autograd traces, before Inductor looks in its
    # on-disk caches: a graph cached under one choice must not serve the other.
    from torch._inductor.utils import run_and_get_code

    from kernel_pytorch.asic import inductor_config

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True) * 3

    q, k, v = (torch.randn(1, heads, 16, 8, device="my_asic") for heads in (4, 2, 2))
    codes = {}
    for host_flash in (True, False):  # the first fills the caches
        torch._dynamo.reset()
        with inductor_config.patch(host_flash_attention=host_flash), torch.no_grad():
            got, codes[host_flash] = run_and_get_code(torch.compile(attend), q, k, v)
        torch.testing.assert_close(got.cpu(), attend(q.cpu(), k.cpu(), v.cpu()))
    assert "aten._scaled_dot_product_flash_attention_for_cpu.default(" in codes[True][0]
    assert "aten._scaled_dot_product_fused_attention_overrideable.default(" in codes[False][0]


def test_default_compile_without_host_addressable_memory_uses_the_my_asic_backend():
    completed = run_python_process("""
        import torch, kernel_pytorch
        import torch.nn.functional as F
        f = lambda x, y: F.gelu(x @ y).sum(-1) * 2 + 1
        x, y = torch.randn(16, 16), torch.randn(16, 16)
        got = torch.compile(f)(x.to("my_asic"), y.to("my_asic"))
        torch.testing.assert_close(got.cpu(), f(x, y))
        print("ok")
    """, env={"MY_ASIC_HOST_ADDRESSABLE": "0"})
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.strip().endswith("ok")
    notices = [line for line in completed.stderr.splitlines() if "'my_asic' backend" in line]
    assert len(notices) == 1


@pytest.mark.parametrize("device", ["cpu", "my_asic"])
def test_kernel_library_ops_stay_extern_kernels_with_dynamic_shapes(device, request):
    if device == "my_asic":
        request.getfixturevalue("host_addressable")
    from torch._inductor.utils import run_and_get_code

    import kernel_pytorch.ops as kops

    def f(x, w):
        return kops.rms_norm(x, w, 1e-6) * 2

    x, w = torch.randn(4, 64, device=device), torch.randn(64, device=device)
    out, code = run_and_get_code(torch.compile(f, dynamic=True), x, w)
    assert "torch.ops.kernel_pytorch.rms_norm.default(" in code[0]
    torch.testing.assert_close(out.cpu(), f(x, w).cpu())


def test_backend_info_names_the_compile_path():
    import kernel_pytorch.ops as kops

    expected = "inductor" if torch.my_asic.get_device_properties(0).host_addressable else "my_asic backend"
    assert kops.backend_info()["my_asic_compile"].startswith(expected)
