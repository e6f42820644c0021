"""Random fills and dropout on the simulator with device memory the host cannot address
(MY_ASIC_HOST_ADDRESSABLE=0): torch.randn/rand/randint, normal_/uniform_/bernoulli_/
exponential_/random_, nn.init and dropout run through the runtime's random entry (kpdr.h),
none of them falls back, seeded sequences reproduce, and bad arguments raise ATen's errors."""

import json

from device_subprocess import last_line, run_python
from random_cases import script


def _run():
    return json.loads(last_line(run_python(script(), env={"MY_ASIC_HOST_ADDRESSABLE": "0"})))


def test_random_fills_and_dropout_have_their_distributions_without_falling_back():
    result = _run()
    assert result["checked"] >= 30
    assert result["fallbacks"] == {}


def test_arguments_aten_rejects_raise_its_errors():
    assert _run()["errors"] == ["std", "from", "p", "lambda", "element < 0", "element < 0", "sum of probabilities",
                                "without replacement"]
