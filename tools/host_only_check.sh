#!/usr/bin/env bash
# Usage: tools/host_only_check.sh BUILD_DIR [SANITIZERS] — builds gradcomm with
# GRADCOMM_CUDA=OFF and runs its tests where the CUDA toolkit (nvcc, its headers and
# libraries, and the NCCL inside it) cannot be seen: in a private mount namespace
# with an empty folder mounted over the toolkit. This is the build a CPU-only user
# (and the Python package's CPU install) gets; it must need nothing from CUDA. Where
# mount namespaces are not allowed, it builds with GRADCOMM_CUDA=OFF in plain sight
# and says the toolkit was not hidden. SANITIZERS (GRADCOMM_SANITIZE's form,
# "address;undefined") builds it with them: tools/test.sh runs the host suite under
# AddressSanitizer + UBSan this way, one build for both checks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
sanitize=${2:-}
extra=""
[ -n "$sanitize" ] && extra="-DGRADCOMM_SANITIZE='$sanitize' -DGRADCOMM_BUILD_EXAMPLES=OFF"
steps="cmake -S . -B '$build' -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADCOMM_CUDA=OFF \
  -DGRADCOMM_BUILD_BENCH=OFF $extra && cmake --build '$build' -j2 && \
  ctest --test-dir '$build' -j2 --output-on-failure --timeout 900"
toolkit=$(readlink -f /usr/local/cuda 2>/dev/null || true)
if [ -n "$toolkit" ] && [ -d "$toolkit" ] && unshare -m true 2>/dev/null; then
  echo "host-only build with $toolkit hidden"
  unshare -m bash -c "mount -t tmpfs gradcomm-hides-cuda '$toolkit' &&
    if nvcc --version >/dev/null 2>&1; then echo 'nvcc still runs'; exit 1; fi &&
    $steps"
else
  echo "host-only build (the CUDA toolkit could not be hidden here: ${toolkit:-none found})"
  bash -c "$steps"
fi
# What the library needs at load time: no CUDA and no NCCL.
if readelf -d "$build/libgradcomm.so" | grep -E 'NEEDED.*(cuda|nccl)'; then
  echo "the host-only libgradcomm.so needs CUDA or NCCL"; exit 1
fi
echo "host-only build: ok"
