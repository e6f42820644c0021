"""Entry point of one rank started by ranks.py: runs MODULE:FUNCTION(rank, world_size).

The return value is written as JSON to $KP_RESULT_FILE. Exceptions propagate
(non-zero exit, traceback in the rank's log).
"""

import importlib
import json
import os
import sys

if __name__ == "__main__":
    module_name, function_name = sys.argv[1].split(":")
    function = getattr(importlib.import_module(module_name), function_name)
    result = function(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    with open(os.environ["KP_RESULT_FILE"], "w") as f:
        json.dump(result, f)
