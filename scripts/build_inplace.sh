#!/usr/bin/env bash
# Rebuilds the C++ extension and libmyasic.so in place (serialised with a lock
# so concurrent builds in one checkout don't collide).
set -euo pipefail
cd "$(dirname "$0")/.."
exec 9>/tmp/kernel_pytorch_build.lock
flock 9
MAX_JOBS=${MAX_JOBS:-2} python setup.py -q build_ext --inplace
