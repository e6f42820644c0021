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
