#!/usr/bin/env bash
# One-step set-up: Python dependencies, the OpenCL CPU driver used by the HAL tests (Debian's
# PoCL), and the package built in place against the installed torch. A repeated run takes about
# a second: pip runs only when requirements-dev.txt changed, and ninja rebuilds what changed.
#
#   scripts/setup.sh                         set up
#   scripts/setup.sh --dry-run               print what would run, change nothing
#   KP_SYSTEM_PACKAGES=0 scripts/setup.sh    never install system packages (PoCL)
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

# 1. Python dependencies, once per content of requirements-dev.txt and environment.
STAMP=build/requirements.stamp
WANT="$(python -c 'import sys; print(sys.prefix)') $(sha256sum requirements-dev.txt | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  echo "requirements-dev.txt: installed"
else
  run python -m pip install -q -r requirements-dev.txt
  if [ "$DRY_RUN" = 0 ]; then mkdir -p build && echo "$WANT" > "$STAMP"; fi
fi

# 2. PoCL gives a real OpenCL device on the CPU. Best effort: without it the OpenCL tests skip
# and say why. As root with apt-get it is installed system-wide, and the line below says so
# before it happens; KP_SYSTEM_PACKAGES=0 skips it.
if [ "${KP_SYSTEM_PACKAGES:-1}" = 0 ]; then
  echo "KP_SYSTEM_PACKAGES=0: not installing PoCL (OpenCL tests skip without an OpenCL driver)"
elif ! ldconfig -p 2>/dev/null | grep -q libpocl; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing the PoCL OpenCL CPU driver system-wide: apt-get install ocl-icd-libopencl1 pocl-opencl-icd" \
         "(KP_SYSTEM_PACKAGES=0 skips this)"
    if [ "$DRY_RUN" = 0 ]; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          ocl-icd-libopencl1 pocl-opencl-icd >/dev/null) \
        || echo "warning: could not install pocl-opencl-icd; OpenCL tests will skip" >&2
    fi
  else
    echo "warning: pocl-opencl-icd not installed (needs apt-get as root); OpenCL tests will skip" >&2
  fi
fi

# 3. The package. The build runs in the foreground, one line per compiled file; pip then only
# registers the editable install (--no-build-isolation: against the torch installed above).
INSTALLED=$(cd / && python -c 'import importlib.util as u, os; s = u.find_spec("kernel_pytorch")
print(os.path.dirname(os.path.realpath(s.origin)) if s and s.origin else "")')
if [ "$INSTALLED" != "$(pwd -P)/kernel_pytorch" ]; then
  run env MAX_JOBS="${MAX_JOBS:-2}" python -m build_support.native
  run python -m pip install -q --no-build-isolation --no-deps -e .
elif [ -f build/native/build.ninja ] && command -v ninja >/dev/null; then
  run env NINJA_STATUS="[%f/%t %es] " ninja -f build/native/build.ninja -j "${MAX_JOBS:-2}"
else
  run env MAX_JOBS="${MAX_JOBS:-2}" python -m build_support.native
fi
