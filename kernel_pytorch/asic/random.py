"""Random number generator control for my_asic devices (torch.cuda's names)."""

from typing import Iterable, List

import torch

from kernel_pytorch import _C
from kernel_pytorch.asic._lazy import _lazy_call, _lazy_init
from kernel_pytorch.asic.device import _device_index, _DeviceLike, device_count


def _generator(device: _DeviceLike) -> torch.Generator:
    _lazy_init()
    return _C._get_default_generator(_device_index(device))


def get_rng_state(device: _DeviceLike = "my_asic") -> torch.Tensor:
    """The state of ``device``'s default generator, as a CPU ByteTensor."""
    return _generator(device).get_state()


def get_rng_state_all() -> List[torch.Tensor]:
    """get_rng_state() of every device."""
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: _DeviceLike = "my_asic") -> None:
    """Restores ``device``'s default generator from get_rng_state() output."""
    state = new_state.clone(memory_format=torch.contiguous_format)
    index = _device_index(device)
    _lazy_call(lambda: _C._get_default_generator(index).set_state(state))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """set_rng_state() for every device, in device order."""
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seeds the current device's default generator."""
    seed = int(seed)

    def cb():
        _C._get_default_generator(_C._get_device()).manual_seed(seed)

    _lazy_call(cb)


def manual_seed_all(seed: int) -> None:
    """Seeds the default generator of every device (torch.manual_seed calls this)."""
    seed = int(seed)

    def cb():
        for i in range(_C._device_count()):
            _C._get_default_generator(i).manual_seed(seed)

    _lazy_call(cb)


def seed() -> None:
    """Seeds the current device's generator with a random number."""
    _lazy_call(lambda: _C._get_default_generator(_C._get_device()).seed())


def seed_all() -> None:
    """Seeds every device's generator with one random number."""

    def cb():
        random_seed = 0
        for i in range(_C._device_count()):
            gen = _C._get_default_generator(i)
            if i == 0:
                gen.seed()
                random_seed = gen.initial_seed()
            else:
                gen.manual_seed(random_seed)

    _lazy_call(cb)


def initial_seed() -> int:
    """The seed of the current device's default generator."""
    return _generator(None).initial_seed()
