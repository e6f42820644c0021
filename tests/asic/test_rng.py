"""Random numbers on my_asic: seeding, generator state, explicit generators."""

import pytest
import torch

from device_subprocess import last_line, run_python

pytestmark = pytest.mark.usefixtures("device_count")


def _draw(device="my_asic", generator=None):
    return torch.rand(8, device=device, generator=generator).cpu()


def test_torch_manual_seed_makes_device_numbers_reproducible():
    torch.manual_seed(123)
    first = _draw()
    torch.manual_seed(123)
    assert torch.equal(_draw(), first)


def test_different_seeds_give_different_numbers():
    torch.manual_seed(1)
    first = _draw()
    torch.manual_seed(2)
    assert not torch.equal(_draw(), first)


def test_consecutive_draws_differ():
    torch.manual_seed(5)
    assert not torch.equal(_draw(), _draw())


def test_rng_state_restores_the_same_sequence():
    torch.manual_seed(7)
    _draw()
    state = torch.my_asic.get_rng_state()
    expected = _draw()
    torch.my_asic.set_rng_state(state)
    assert torch.equal(_draw(), expected)


def test_initial_seed_reports_manual_seed():
    torch.my_asic.manual_seed(4242)
    assert torch.my_asic.initial_seed() == 4242


def test_seed_replaces_the_manual_seed():
    torch.my_asic.manual_seed(4242)
    torch.my_asic.seed()
    assert torch.my_asic.initial_seed() != 4242


def test_manual_seed_all_seeds_every_device_alike(two_devices):
    torch.my_asic.manual_seed_all(11)
    on_first = _draw(two_devices[0])
    on_second = _draw(two_devices[1])
    assert torch.equal(on_first, on_second)


def test_manual_seed_seeds_only_the_current_device(two_devices):
    torch.my_asic.manual_seed_all(11)
    reference = _draw(two_devices[1])
    torch.my_asic.manual_seed_all(11)
    with torch.my_asic.device(0):
        torch.my_asic.manual_seed(99)
    assert torch.equal(_draw(two_devices[1]), reference)


def test_devices_have_independent_rng_state(two_devices):
    torch.my_asic.manual_seed_all(3)
    expected_second = _draw(two_devices[1])
    torch.my_asic.manual_seed_all(3)
    _draw(two_devices[0])  # advances device 0 only
    assert torch.equal(_draw(two_devices[1]), expected_second)


def test_explicit_generator_is_reproducible_and_leaves_default_alone():
    torch.manual_seed(8)
    expected_default = _draw()
    torch.manual_seed(8)
    generator = torch.Generator("my_asic").manual_seed(17)
    from_generator = _draw(generator=generator)
    assert torch.equal(_draw(generator=torch.Generator("my_asic").manual_seed(17)), from_generator)
    assert torch.equal(_draw(), expected_default)


def test_default_generator_is_a_my_asic_generator():
    assert torch.my_asic.get_rng_state().dtype == torch.uint8
    assert torch.Generator("my_asic").device.type == "my_asic"


def test_seed_set_before_initialisation_applies_at_first_use():
    out = run_python(
        """
        import torch, kernel_pytorch
        torch.manual_seed(31)
        queued = not torch.my_asic.is_initialized()
        first = torch.rand(4, device="my_asic").tolist()
        torch.manual_seed(31)
        print(queued, torch.my_asic.initial_seed(), torch.rand(4, device="my_asic").tolist() == first)
        """
    )
    assert last_line(out) == "True 31 True"
