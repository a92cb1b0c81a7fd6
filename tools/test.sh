#!/usr/bin/env bash
# Builds gradcomm from scratch and runs the whole test suite — the README's test
# command; .ci/run runs exactly this. GPU tests skip, with the reason, on a
# machine without a GPU. Stages:
#   0. formatting: every C, C++ and CUDA file as .clang-format says (tools/format_check.sh)
#   1. normal build, every test (CTest; the torchrun example with the venv's PyTorch)
#   2. the Python package with real PyTorch (tools/python_tests.sh: a virtual
#      environment from PyPI, pip install ./python, pytest)
#   3. a host-only build (GRADCOMM_CUDA=OFF) with the CUDA toolkit hidden (what a
#      CPU-only user and pip's CPU install build), under AddressSanitizer +
#      UndefinedBehaviorSanitizer, every test (tools/host_only_check.sh): one build
#      for both checks
#   4. the threaded tests (memory, comm, and the reducer: it runs host buckets on the
#      communicator's lane) under ThreadSanitizer
#   5. each libFuzzer target for a bounded time (GRADCOMM_FUZZ_SECONDS, default 15)
# Builds go through ccache when it is there (install_deps.sh installs it): on a
# machine that ran this before, only what changed is compiled again.
# GRADCOMM_TEST_QUICK=1 runs stages 1 and 2 only (for local iteration).
# Usage: tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
# Sanitizer reports fail the test that caused them. allocator_may_return_null:
# an impossible allocation returns NULL as it does without ASan (the
# out-of-memory tests check that path) instead of aborting.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1}

# The compiler cache: paths below the checkout are hashed relative to it (a fresh
# clone elsewhere on the machine hits the same entries), and the build folder is not
# hashed (debug info may name another clone's build folder: harmless for tests).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}

tools/install_deps.sh
start=$(date +%s)
torch_python=$(tools/python_venv.sh)
stage() { echo; echo "=== [$(( $(date +%s) - start ))s] $*"; }

common=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo)
light=(-DGRADCOMM_BUILD_BENCH=OFF -DGRADCOMM_BUILD_EXAMPLES=OFF)

stage "0/5 formatting"
tools/format_check.sh

stage "1/5 build and test"
cmake -S . -B build "${common[@]}" -DGRADCOMM_TORCH_PYTHON="$torch_python"
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure --timeout 600 | tee build/ctest-summary.log
counts=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" build/ctest-summary.log | tail -1)
total=$(echo "$counts" | sed -E 's/.*out of ([0-9]+).*/\1/')
skipped=$(grep -c "(Skipped)" build/ctest-summary.log || true)

stage "2/5 Python package with PyTorch"
tools/python_tests.sh build | tee build/pytest-summary.log
py_passed=$(grep -oE "[0-9]+ passed" build/pytest-summary.log | tail -1 | cut -d' ' -f1)
py_skipped=$(grep -oE "[0-9]+ skipped" build/pytest-summary.log | tail -1 | cut -d' ' -f1)

if [ -z "${GRADCOMM_TEST_QUICK:-}" ]; then
  stage "3/5 host-only build (GRADCOMM_CUDA=OFF, the CUDA toolkit hidden) under AddressSanitizer + UBSan"
  # The soak runs its full 10,000 steps in stage 1; 2,000 under the sanitizers.
  GRADCOMM_SOAK_STEPS=2000 tools/host_only_check.sh build-host-only "address;undefined" |
    tee build/host-only-summary.log

  stage "4/5 threaded tests under ThreadSanitizer"
  cmake -S . -B build-tsan "${common[@]}" "${light[@]}" -DGRADCOMM_SANITIZE=thread
  cmake --build build-tsan -j2
  GRADCOMM_SOAK_STEPS=2000 ctest --test-dir build-tsan -j2 --output-on-failure --timeout 900 -L 'memory|comm|reducer'

  stage "5/5 fuzzing, ${GRADCOMM_FUZZ_SECONDS:-15}s per target"
  tools/fuzz.sh "${GRADCOMM_FUZZ_SECONDS:-15}"
fi

stage "done"
host_only=$(grep -E "tests passed, [0-9]+ tests failed" build/host-only-summary.log 2>/dev/null | tail -1 || true)
echo "summary: $((total - skipped)) passed, 0 failed, ${skipped} skipped (CTest); ${py_passed:-0} passed, ${py_skipped:-0} skipped (pytest)${host_only:+; host-only build: $host_only}"
