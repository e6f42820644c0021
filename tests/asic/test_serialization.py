"""torch.save / torch.load of my_asic tensors, modules and state dicts."""

import io

import pytest
import torch

pytestmark = pytest.mark.usefixtures("two_devices")


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def test_tensors_load_back_onto_their_saved_devices():
    saved = {"first": torch.arange(3.0, device="my_asic:0"), "second": torch.arange(4.0, device="my_asic:1")}
    loaded = _round_trip(saved)
    assert loaded["first"].device == torch.device("my_asic", 0)
    assert loaded["second"].device == torch.device("my_asic", 1)
    assert loaded["second"].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_map_location_cpu_loads_onto_cpu():
    loaded = _round_trip(torch.arange(3.0, device="my_asic"), map_location="cpu")
    assert loaded.device == torch.device("cpu")
    assert loaded.tolist() == [0.0, 1.0, 2.0]


def test_map_location_device_string_moves_to_that_device():
    loaded = _round_trip(torch.arange(3.0, device="my_asic:0"), map_location="my_asic:1")
    assert loaded.device == torch.device("my_asic", 1)
    assert loaded.cpu().tolist() == [0.0, 1.0, 2.0]


def test_map_location_dict_remaps_devices():
    loaded = _round_trip(torch.ones(2, device="my_asic:1"), map_location={"my_asic:1": "my_asic:0"})
    assert loaded.device == torch.device("my_asic", 0)


def test_cpu_checkpoint_loads_onto_my_asic():
    loaded = _round_trip(torch.arange(3.0), map_location="my_asic")
    assert loaded.device.type == "my_asic"
    assert loaded.cpu().tolist() == [0.0, 1.0, 2.0]


def test_views_saved_together_still_share_storage():
    base = torch.zeros(6, device="my_asic")
    loaded = _round_trip({"base": base, "tail": base[3:]})
    loaded["tail"].fill_(1.0)
    assert loaded["base"].cpu().tolist() == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]


def test_state_dict_round_trip_restores_module_on_device():
    torch.manual_seed(0)
    source = torch.nn.Linear(4, 2).to("my_asic")
    target = torch.nn.Linear(4, 2).to("my_asic")
    target.load_state_dict(_round_trip(source.state_dict()))
    for expected, actual in zip(source.parameters(), target.parameters()):
        assert actual.device.type == "my_asic"
        assert torch.equal(actual.cpu(), expected.cpu())


def test_device_state_dict_loads_into_cpu_module():
    source = torch.nn.Linear(4, 2).to("my_asic")
    target = torch.nn.Linear(4, 2)
    target.load_state_dict(_round_trip(source.state_dict(), map_location="cpu"))
    assert torch.equal(target.weight, source.weight.cpu())


def test_optimizer_state_round_trips_on_device():
    param = torch.nn.Parameter(torch.ones(3, device="my_asic"))
    optimizer = torch.optim.Adam([param], lr=0.1)
    param.sum().backward()
    optimizer.step()
    loaded = _round_trip(optimizer.state_dict())
    exp_avg = loaded["state"][0]["exp_avg"]
    assert exp_avg.device.type == "my_asic"
    assert torch.equal(exp_avg.cpu(), optimizer.state[param]["exp_avg"].cpu())


@pytest.mark.parametrize("as_dict", [False, True])
def test_map_location_to_a_missing_device_says_which_devices_exist(as_dict):
    count = torch.my_asic.device_count()
    missing = f"my_asic:{count + 3}"
    map_location = {"my_asic:0": missing} if as_dict else missing
    with pytest.raises(RuntimeError) as error:
        _round_trip(torch.arange(3.0, device="my_asic:0"), map_location=map_location)
    message = str(error.value)
    existing = ", ".join(f"'my_asic:{i}'" for i in range(count))
    assert f"'{missing}'" in message and f"this process has {count} my_asic device(s): {existing}" in message
    assert "map_location='my_asic:0'" in message
    assert "Please use torch.load with map_location" not in message


def test_device_stays_usable_after_a_bad_map_location():
    with pytest.raises(RuntimeError):
        _round_trip(torch.arange(3.0, device="my_asic:0"), map_location="my_asic:5")
    assert _round_trip(torch.arange(3.0, device="my_asic:0"), map_location="my_asic:1").device == torch.device("my_asic", 1)


def test_backend_metadata_is_kept_on_the_tensor():
    t = torch.ones(3, device="my_asic")
    torch._utils.set_tensor_metadata(t, {"my_asic_nz_format": True})
    assert torch._utils.get_tensor_metadata(t) == {"my_asic_nz_format": True}


def test_backend_metadata_survives_save_and_load():
    t = torch.ones(3, device="my_asic:1")
    torch._utils.set_tensor_metadata(t, {"my_asic_nz_format": True, "my_asic_compressed": False})
    loaded = _round_trip(t)
    assert loaded.device == torch.device("my_asic:1")
    assert torch._utils.get_tensor_metadata(loaded) == {"my_asic_nz_format": True, "my_asic_compressed": False}


def test_backend_metadata_is_dropped_when_loading_onto_cpu():
    t = torch.ones(3, device="my_asic")
    torch._utils.set_tensor_metadata(t, {"my_asic_nz_format": True})
    assert torch._utils.get_tensor_metadata(_round_trip(t, map_location="cpu")) == {}


def test_tensor_without_backend_metadata_has_none():
    assert torch._utils.get_tensor_metadata(_round_trip(torch.ones(3, device="my_asic"))) == {}
