"""A user's torchrun script (tests/distributed/test_process_groups.py runs it
with torchrun): one my_asic device per LOCAL_RANK, env:// rendezvous."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from group_programs import torchrun_entry  # noqa: E402

if __name__ == "__main__":
    result = torchrun_entry(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    with open(os.path.join(sys.argv[1], f"rank{os.environ['RANK']}.json"), "w") as f:
        json.dump(result, f)
