#!/usr/bin/env bash
# Development build: configures and builds every native library in place (build_support/native.py),
# serialised with a lock so concurrent builds on one machine take turns.
set -euo pipefail
cd "$(dirname "$0")/.."
exec 9>/tmp/kernel_pytorch_build.lock
flock 9
exec python -m build_support.native
