"""import kernel_pytorch registers myccl with torch.distributed for my_asic."""

import torch.distributed as dist

from kernel_pytorch.asic.distributed import register_myccl


def test_myccl_is_a_known_backend_after_import():
    assert dist.Backend.MYCCL == "myccl"
    assert "myccl" in dist.Backend.backend_list


def test_myccl_is_the_default_backend_for_my_asic_and_gloo_stays_the_cpu_default():
    assert dist.Backend.default_device_backend_map["my_asic"] == "myccl"
    assert dist.Backend.default_device_backend_map["cpu"] == "gloo"


def test_registering_again_is_harmless():
    assert register_myccl() is True
    assert dist.Backend.backend_list.count("myccl") == 1


def _one_rank(code):
    """Runs ``code`` as a world of one rank in a fresh interpreter (``init(backend)`` sets the group up)."""
    import os
    import subprocess
    import sys
    import textwrap

    preamble = textwrap.dedent("""
        import tempfile, torch, kernel_pytorch, torch.distributed as dist
        from kernel_pytorch.asic.distributed import set_default_backend
        def init(backend):
            dist.init_process_group(backend, init_method=f"file://{tempfile.mktemp()}", rank=0, world_size=1)
    """)
    return subprocess.run([sys.executable, "-c", preamble + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=os.path.dirname(os.path.abspath(__file__)))


def test_a_group_naming_myccl_gets_a_default_backend_and_tears_down_without_a_warning():
    result = _one_rank("""
        init("cpu:gloo,my_asic:myccl")
        print(set_default_backend(), dist.distributed_c10d._get_default_group().name())
        t = torch.ones(3, device="my_asic")
        dist.all_reduce(t)
        print(t.sum().item())
        dist.destroy_process_group()
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "custom", "3.0"]
    assert "No backend of type" not in result.stderr


def test_groups_without_myccl_are_left_alone():
    result = _one_rank("""
        init("gloo")
        print(set_default_backend(), dist.distributed_c10d._get_default_group().name())
        dist.destroy_process_group()
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "gloo"]
