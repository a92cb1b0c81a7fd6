#!/usr/bin/env bash
# Run HERE (the development machine) before a GPU session, after building
# build-gpu/ (Release, sm_90, GoogleTest/Benchmark from .deps/): copies only what
# runs on the GPU machine into .gpu-carry/ (git-ignored) and packs it into
# .gpu-carry.tar.gz, the one file to name in the device tool's `carry`:
#   .gpu-carry/build-gpu/...   libgradcomm, test, bench and tool programs, same layout
#   .gpu-carry/lib/            libbenchmark.so.1debian
#   .gpu-carry/*_perf          nccl-tests' all_reduce/all_gather/reduce_scatter_perf, if .nccl-tests/build has them
# Then on the GPU machine: GPU_CHECK_PREBUILT=.gpu-carry.tar.gz tools/gpu_check.sh $OUT
set -euo pipefail
cd "$(dirname "$0")/.."
src=build-gpu
[ -f "$src/CMakeCache.txt" ] || { echo "no $src/: build it first (see docs/gpu.md)"; exit 1; }
rm -rf .gpu-carry
mkdir -p .gpu-carry/lib
cp "$src/CMakeCache.txt" .gpu-carry/
( cd "$src" && find . \( -path ./install-test -o -path ./install \) -prune -o -type f \( -name 'libgradcomm.so*' -o -name 'gradcomm_*tests' \
    -o -name 'gradcomm_*bench*' -o -name 'gradcomm-*' -o -name 'gradcomm-info' -o -name 'gradcomm_bootstrap_rank' -o -name 'gradcomm_cuda_ipc_rank' \
    -o -name 'gradcomm_example_*' \) -perm -u+x -print ) |
  while read -r f; do mkdir -p ".gpu-carry/build-gpu/$(dirname "$f")"; cp -P "$src/$f" ".gpu-carry/build-gpu/$f"; done
( cd "$src" && find . -maxdepth 1 -name 'libgradcomm.so*' ) | while read -r f; do cp -P "$src/$f" .gpu-carry/build-gpu/; done
cp "$src/CMakeCache.txt" .gpu-carry/build-gpu/
# Symbols off (the device tool carries 64 MiB at most): ~15% smaller.
find .gpu-carry/build-gpu -type f -perm -u+x ! -name '*.so*' -exec strip {} +
[ -f .deps/benchmark/lib/libbenchmark.so.1debian ] && cp -L .deps/benchmark/lib/libbenchmark.so.1debian .gpu-carry/lib/
# nccl-tests' programs for the collectives gradcomm-perf is compared on (stripped: ~4 MiB each).
for t in all_reduce all_gather reduce_scatter; do
  [ -x ".nccl-tests/build/${t}_perf" ] && cp ".nccl-tests/build/${t}_perf" .gpu-carry/ && strip ".gpu-carry/${t}_perf"
done
# One gzip archive to carry: the programs shrink ~3x (56 MiB -> 17 MiB on 2026-11-27),
# which leaves room under the tool's 64 MiB for nccl-tests and the wheel.
rm -f .gpu-carry.tar.gz
tar -C .gpu-carry -czf .gpu-carry.tar.gz .
du -sh .gpu-carry .gpu-carry.tar.gz
echo "carry .gpu-carry.tar.gz; on the GPU machine: GPU_CHECK_PREBUILT=.gpu-carry.tar.gz tools/gpu_check.sh \$OUT"
