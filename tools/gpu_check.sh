#!/usr/bin/env bash
# One call on a GPU machine: build, run the whole test suite with the GPU, run the
# GPU tests under compute-sanitizer, run the benchmarks and the PyTorch/NCCL peers,
# and write everything to OUT_DIR (at most 8 files, so the device tool brings them
# all back):
#   env.txt        device, driver, CUDA, NCCL, commit, date
#   build.log      configure + build
#   tests.log      ctest, GPU tests included
#   sanitizer.log  compute-sanitizer memcheck + racecheck on the GPU tests
#   bench.json     every Google Benchmark program's JSON, merged
#   perf.txt       gradcomm-perf runs (and their JSON lines)
#   peers.json     PyTorch peers measured in the same run
#   summary.txt    a short table, also printed last
#
# Usage (on the GPU machine, repository root; .deps/ from tools/prepare_gpu_deps.sh
# carried along):  tools/gpu_check.sh OUT_DIR
# Env: GRADCOMM_COMMIT (when .git is absent), GPU_CHECK_SKIP_SANITIZER=1, GPU_CHECK_JOBS,
#      GPU_CHECK_STAGES (default "build tests sanitizer bench perf peers": run a subset
#      to fit one device call's 10 minutes), GPU_CHECK_PREBUILT=1 (build-gpu/ was built
#      on the development machine and carried: skip the build and make its absolute
#      paths resolve here), BENCH_REPS.
set -uo pipefail
out=${1:?usage: tools/gpu_check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
build=$root/build-gpu
jobs=${GPU_CHECK_JOBS:-$(nproc)}
export PATH=/usr/local/cuda/bin:$PATH
stages=" ${GPU_CHECK_STAGES:-build tests sanitizer bench perf peers} "
want() { [[ "$stages" == *" $1 "* ]]; }
summary=$out/summary.txt
touch "$summary"
note() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$summary"; }

# --- environment -----------------------------------------------------------------
nccl_dir=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s else '')" 2>/dev/null || true)
if [ -n "$nccl_dir" ]; then
  export NCCL_ROOT=$nccl_dir
  export LD_LIBRARY_PATH=$nccl_dir/lib:${LD_LIBRARY_PATH:-}
fi
commit=${GRADCOMM_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $commit"
  echo "host: $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  echo "NCCL_ROOT: ${NCCL_ROOT:-<system>}"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())))" 2>&1
  nvidia-smi 2>&1
} >"$out/env.txt"
note "gpu_check: $(head -4 "$out/env.txt" | tail -1)"

# --- build -------------------------------------------------------------------------
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
  # CTest files and RUNPATHs hold the development machine's absolute build path.
  made_in=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  if [ -n "$made_in" ] && [ "$made_in" != "$root" ] && [ ! -e "$made_in" ]; then
    mkdir -p "$(dirname "$made_in")" && ln -s "$root" "$made_in"
  fi
  note "build: prebuilt (made in ${made_in:-?})"
elif want build; then
  cfg=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90})
  [ -d "$root/.deps/googletest" ] && cfg+=(-DGRADCOMM_GTEST_SOURCE_DIR="$root/.deps/googletest")
  [ -d "$root/.deps/benchmark" ] && cfg+=(-DGRADCOMM_BENCHMARK_ROOT="$root/.deps/benchmark")
  if ! { cmake "${cfg[@]}" && cmake --build "$build" -j"$jobs"; } >"$out/build.log" 2>&1; then
    note "BUILD FAILED (see build.log)"
    tail -30 "$out/build.log"
    exit 1
  fi
  note "build: ok"
fi
[ -f "$root/.deps/benchmark/lib/libbenchmark.so.1debian" ] && export LD_LIBRARY_PATH=$root/.deps/benchmark/lib:${LD_LIBRARY_PATH:-}
"$build/tools/gradcomm-info" >>"$out/env.txt" 2>&1

# --- tests -------------------------------------------------------------------------
want tests && {
ctest --test-dir "$build" -j4 --output-on-failure --timeout 300 >"$out/tests.log" 2>&1
note "tests: $(grep -E 'tests passed|tests failed' "$out/tests.log" | tail -1)"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|Subprocess)" "$out/tests.log" | head -20 | tee -a "$summary"
skipped=$(grep -c "(Skipped)" "$out/tests.log" || true)
note "tests skipped: $skipped"
}

# --- compute-sanitizer on the GPU tests --------------------------------------------
if want sanitizer && [ -z "${GPU_CHECK_SKIP_SANITIZER:-}" ] && command -v compute-sanitizer >/dev/null; then
  : >"$out/sanitizer.log"
  for t in $(find "$build/tests" -maxdepth 3 -type f -executable -name 'gradcomm_*tests'); do
    for tool in memcheck racecheck; do
      echo "=== $tool $(basename "$t")" >>"$out/sanitizer.log"
      timeout 600 compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" --gtest_filter='*Gpu*' \
        >>"$out/sanitizer.log" 2>&1
      echo "=== exit $?" >>"$out/sanitizer.log"
    done
  done
  note "sanitizer: $(grep -c '=== exit 0' "$out/sanitizer.log") clean, $(grep -c '=== exit 99' "$out/sanitizer.log") with errors, $(grep -Ec '=== exit [^09]' "$out/sanitizer.log") other failures"
fi

# --- benchmarks ----------------------------------------------------------------------
benchdir=$(mktemp -d)
want bench && for b in $(find "$build/bench" -maxdepth 3 -type f -executable -name 'gradcomm_*bench*' | sort); do
  name=$(basename "$b")
  timeout 600 "$b" --benchmark_format=console --benchmark_out="$benchdir/$name.json" \
    --benchmark_out_format=json --benchmark_repetitions=${BENCH_REPS:-5} \
    --benchmark_report_aggregates_only=true >"$benchdir/$name.txt" 2>&1
  note "bench $name: exit $?"
done
want bench && python3 - "$benchdir" "$out/bench.json" <<'PY'
import glob, json, os, sys
merged = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        merged[os.path.basename(f)[:-5]] = json.load(open(f))
    except Exception as e:
        merged[os.path.basename(f)[:-5]] = {"error": str(e)}
json.dump(merged, open(sys.argv[2], "w"), indent=1)
PY

# --- gradcomm-perf -------------------------------------------------------------------
perf=$build/tools/perf/gradcomm-perf
if want perf && [ -x "$perf" ]; then
  {
    echo "### gradcomm-perf (defaults)"; "$perf" -J "$benchdir/perf_default.json"
    echo "### gradcomm-perf --local 4 (one GPU, 4 local ranks)"; "$perf" --local 4 -b 1M -e 256M -f 2
    for c in all_gather reduce_scatter broadcast reduce; do
      echo "### gradcomm-perf -C $c"; "$perf" -C $c -b 8 -e 128M -f 4
    done
    echo "### JSON"; cat "$benchdir"/perf_default.json
  } >"$out/perf.txt" 2>&1
  note "perf: $(grep -m1 'Avg bus bandwidth' "$out/perf.txt")"
fi

# --- peers (PyTorch, NCCL) -----------------------------------------------------------
: >"$benchdir/peers.jsonl"; : >"$benchdir/peers.err"
want peers && for p in $(find "$root/bench" -name '*peer*.py' | sort); do
  timeout 900 python3 "$p" >>"$benchdir/peers.jsonl" 2>>"$benchdir/peers.err"
  note "peer $(basename "$p"): exit $?"
done
want peers && python3 - "$benchdir/peers.jsonl" "$benchdir/peers.err" "$out/peers.json" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{") or line.startswith("["):
        try:
            rows.append(json.loads(line))
        except Exception:
            rows.append({"unparsed": line})
json.dump({"results": rows, "stderr": open(sys.argv[2]).read()[-20000:]}, open(sys.argv[3], "w"), indent=1)
PY

echo "=== summary"
cat "$summary"
