"""torch.load onto my_asic: a clear error when the target device does not exist.

torch's own check ends in "Please use torch.load with map_location to map your storages
to an existing device", which is no help to someone who passed
``map_location="my_asic:5"``.  This deserializer runs before torch's PrivateUse1 one
(``torch.serialization.register_package``), rejects only an index this process does not
have, and otherwise leaves the work to torch.
"""

import re
from typing import Any, Optional

import torch

DEVICE_NAME = "my_asic"
_LOCATION = re.compile(rf"^{DEVICE_NAME}(?::(\d+))?$")
# Lower runs first; torch's PrivateUse1 deserializer is registered at 23.
_PRIORITY = 19


def _tag(obj: Any) -> Optional[str]:
    return None  # saving is torch's PrivateUse1 tagger's job


def _check_target(obj: Any, location: str) -> None:
    match = _LOCATION.match(location)
    if match is None or match.group(1) is None:
        return None
    index = int(match.group(1))
    count = torch.my_asic.device_count()
    if index < count:
        return None
    have = ", ".join(f"'{DEVICE_NAME}:{i}'" for i in range(count)) or "none"
    raise RuntimeError(
        f"torch.load: storages are to go to '{location}' (your map_location, or where they "
        f"were saved when map_location is not given), but this process has {count} "
        f"{DEVICE_NAME} device(s): {have}. Pass map_location='{DEVICE_NAME}:0' (any existing "
        f"index), a dict such as {{'{location}': '{DEVICE_NAME}:0'}}, or 'cpu'; "
        f"MY_ASIC_DEVICE_COUNT sets how many devices the simulator has."
    )


def register() -> None:
    """Install the check once per process."""
    from torch.serialization import _package_registry

    if any(entry[2] is _check_target for entry in _package_registry):
        return
    torch.serialization.register_package(_PRIORITY, _tag, _check_target)
