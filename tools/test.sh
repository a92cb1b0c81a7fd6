#!/usr/bin/env bash
# Builds gradcomm from scratch and runs the whole test suite (the README's test
# command; .ci/run runs exactly this). GPU tests skip, with the reason, on a
# machine without a GPU. Usage: tools/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
export PATH=/usr/local/cuda/bin:$PATH

tools/install_deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j2
ctest --test-dir "$build" -j2 --output-on-failure --timeout 600
