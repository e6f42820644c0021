#!/usr/bin/env bash
# One-step set-up on a fresh machine: Python dependencies, the OpenCL CPU
# driver used by the HAL tests (Debian's PoCL), and the package itself built
# against the installed torch.
set -euo pipefail
cd "$(dirname "$0")/.."

python -m pip install -q -r requirements-dev.txt

# PoCL gives a real OpenCL device on the CPU. Best effort: without it the
# OpenCL tests skip and say why.
if ! ldconfig -p 2>/dev/null | grep -q libpocl; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        ocl-icd-libopencl1 pocl-opencl-icd >/dev/null) \
      || echo "warning: could not install pocl-opencl-icd; OpenCL tests will skip" >&2
  else
    echo "warning: pocl-opencl-icd not installed (needs apt-get as root); OpenCL tests will skip" >&2
  fi
fi

# --no-build-isolation: compile against the torch installed above instead of
# letting pip fetch another (multi-GB) torch into a build environment.
MAX_JOBS=${MAX_JOBS:-2} python -m pip install -q --no-build-isolation --no-deps -e .
