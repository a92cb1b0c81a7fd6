#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang and runs each for a bounded
# time on its committed seed corpus. New interesting inputs go to a scratch copy,
# never into the repository; a crash leaves its input in build-fuzz/artifacts/.
# Usage: tools/fuzz.sh [seconds-per-target (default 60)] [target-name-filter]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
filter=${2:-}
export PATH=/usr/local/cuda/bin:$PATH
build=build-fuzz

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DGRADCOMM_FUZZ=ON \
  -DGRADCOMM_BUILD_TESTS=OFF -DGRADCOMM_BUILD_BENCH=OFF -DGRADCOMM_BUILD_TOOLS=OFF \
  -DGRADCOMM_BUILD_EXAMPLES=OFF >/tmp/gradcomm-fuzz-configure.log 2>&1 || { cat /tmp/gradcomm-fuzz-configure.log; exit 1; }
targets=$(cd tests/fuzz && ls corpus)
for t in $targets; do
  [ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
  cmake --build "$build" -j2 --target "gradcomm_fuzz_$t"
done

mkdir -p "$build/artifacts"
status=0
for t in $targets; do
  [ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
  bin="$build/tests/fuzz/gradcomm_fuzz_$t"
  [ -x "$bin" ] || { echo "fuzz: $t not built"; status=1; continue; }
  work=$(mktemp -d)
  echo "fuzz: $t for ${seconds}s"
  if ! "$bin" "$work" "tests/fuzz/corpus/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$build/artifacts/${t}-" >"$build/fuzz-$t.log" 2>&1; then
    echo "fuzz: $t FAILED"; tail -40 "$build/fuzz-$t.log"; status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz-$t.log" | tr '\n' ' '; echo
  fi
  rm -rf "$work"
done
exit $status
