#!/usr/bin/env bash
# Builds gradcomm and runs the main job: gradcomm-perf with its defaults
# (all-reduce 8 B..128 MiB on all visible GPUs; with no GPU, 2 host ranks on the
# local transport). Until gradcomm-perf is built, it prints the environment report.
# Usage: tools/run.sh [gradcomm-perf arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH

tools/install_deps.sh >&2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
cmake --build build -j2 >&2
if [ -x build/tools/perf/gradcomm-perf ]; then
  exec build/tools/perf/gradcomm-perf "$@"
fi
exec build/tools/gradcomm-info
