#!/usr/bin/env bash
# One-step set-up: Python dependencies, the OpenCL CPU driver used by the HAL tests
# (Debian's PoCL), and the package itself built against the installed torch.
#
# Repeated runs take seconds: each step is skipped when its inputs did not change
# (scripts/setup_state.py decides; a fresh clone always gets the full build).
#
#   scripts/setup.sh            set up
#   scripts/setup.sh --dry-run  print what would run, change nothing
set -euo pipefail
cd "$(dirname "$0")/.."

DRY_RUN=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY_RUN=1
elif [ $# -gt 0 ]; then
  echo "usage: scripts/setup.sh [--dry-run]" >&2
  exit 2
fi

run() {
  echo "+ $*"
  if [ "$DRY_RUN" = 0 ]; then "$@"; fi
}

# 1. Python dependencies.
if python scripts/setup_state.py requirements requirements-dev.txt 2>/dev/null; then
  echo "requirements-dev.txt: already installed"
else
  run python -m pip install -q -r requirements-dev.txt
fi

# 2. PoCL gives a real OpenCL device on the CPU. Best effort: without it the OpenCL
# tests skip and say why. As root with apt-get it is installed system-wide, and the
# line below says so before it happens.
if ! ldconfig -p 2>/dev/null | grep -q libpocl; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing the PoCL OpenCL CPU driver system-wide: apt-get install ocl-icd-libopencl1 pocl-opencl-icd"
    if [ "$DRY_RUN" = 0 ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          ocl-icd-libopencl1 pocl-opencl-icd >/dev/null) \
        || echo "warning: could not install pocl-opencl-icd; OpenCL tests will skip" >&2
    fi
  else
    echo "warning: pocl-opencl-icd not installed (needs apt-get as root); OpenCL tests will skip" >&2
  fi
fi

# 3. The package. --no-build-isolation: compile against the torch installed above
# instead of letting pip fetch another (multi-GB) torch into a build environment.
ACTION=$(python scripts/setup_state.py plan .)
case "$ACTION" in
  install)
    run env MAX_JOBS="${MAX_JOBS:-2}" python -m pip install -q --no-build-isolation --no-deps -e .
    ;;
  build)
    # The editable install already points here: rebuild in place, incrementally (ninja).
    run env MAX_JOBS="${MAX_JOBS:-2}" python setup.py -q build_ext --inplace
    ;;
  skip)
    echo "kernel_pytorch: up to date, not rebuilt"
    ;;
  *)
    echo "scripts/setup_state.py plan answered '$ACTION'" >&2
    exit 1
    ;;
esac
if [ "$ACTION" != skip ]; then
  run python scripts/setup_state.py record .
fi
