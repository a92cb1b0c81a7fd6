#!/usr/bin/env bash
# The Python package's tests with real PyTorch (a stage of tools/test.sh):
#   1. the virtual environment of tools/python_venv.sh (PyTorch from PyPI);
#   2. `pip install ./python` binding the library of an existing build
#      (cmake --install BUILD --prefix BUILD/install), so nothing is compiled twice;
#   3. pytest python/tests (parity with torch's DDP, AMP, zero_grad, checkpoints,
#      bad input, the binding against the header, the torchrun example, the
#      plotting tools on real traces and gradcomm-perf output).
# Usage: tools/python_tests.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
python=$(tools/python_venv.sh)

cmake --install "$build" --prefix "$build/install" > /dev/null
GRADCOMM_PREFIX="$PWD/$build/install" "$python" -m pip install -q --force-reinstall --no-deps ./python
# From inside tests/, so that the installed package (not python/gradcomm) is the one imported.
root=$PWD
cd python/tests
GRADCOMM_INCLUDE_DIR="$root/include/gradcomm" GRADCOMM_SOURCE_DIR="$root" GRADCOMM_BIN_DIR="$root/$build/install/bin" \
  "$python" -m pytest -q -p no:cacheprovider --junitxml="$root/$build/python-tests.xml" .
