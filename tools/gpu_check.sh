#!/usr/bin/env bash
# One call on a GPU machine: build, run the whole test suite with the GPU, run the
# GPU tests under compute-sanitizer, run the benchmarks and the PyTorch/NCCL peers,
# and write everything to OUT_DIR (at most 8 files, so the device tool brings them
# all back):
#   env.txt        device, driver, CUDA, NCCL, commit, date
#   build.log      configure + build
#   tests.log      ctest, GPU tests included
#   sanitizer.log  compute-sanitizer memcheck, racecheck, synccheck, initcheck on the GPU tests
#   bench.json     every Google Benchmark program's JSON, merged
#   perf.txt       gradcomm-perf runs (and their JSON lines)
#   peers.json     PyTorch peers measured in the same run
#   summary.txt    a short table, also printed last
#
# Usage (on the GPU machine, repository root):
#   source build there:  carry .deps/ (tools/prepare_gpu_deps.sh); tools/gpu_check.sh OUT_DIR
#   built here:          carry .gpu-carry.tar.gz (tools/pack_gpu_build.sh; or the folder .gpu-carry/);
#                        GPU_CHECK_PREBUILT=.gpu-carry.tar.gz tools/gpu_check.sh OUT_DIR
# Env: GRADCOMM_COMMIT (when .git is absent), GPU_CHECK_SKIP_SANITIZER=1, GPU_CHECK_JOBS,
#      GPU_CHECK_STAGES (default "build tests sanitizer bench perf cudaipc reducer powersgd nccltests peers python": a subset
#      to fit one device call's 10 minutes), GPU_CHECK_PREBUILT=1 (build-gpu/ was built
#      on the development machine and carried: skip the build and make its absolute
#      paths resolve here), BENCH_REPS, GPU_CHECK_BENCHES (a regex on the Google
#      Benchmark programs' names), BENCH_ARGS (extra flags for them, e.g.
#      --benchmark_filter=gpu/), GPU_CHECK_PEERS (a regex on the peer scripts' names; default the GPU peers),
#      GPU_CHECK_SANITIZE (a regex on the test programs compute-sanitizer runs),
#      GPU_CHECK_TESTS (with a prebuilt carry: a regex on the test programs the tests stage runs),
#      GPU_CHECK_TEST_LIMIT (with a prebuilt carry: seconds a test program may run, default 600),
#      GPU_CHECK_BENCH_LIMIT (seconds a Google Benchmark program may run, default 600; its
#      console output in bench.json's "<name>.txt" entry shows how far one cut off got),
#      GPU_CHECK_POWERSGD_ROUNDS (rounds of the powersgd stage's bucket-cap A/B, default 2),
#      GPU_CHECK_SANITIZER_TOOLS (default "memcheck racecheck synccheck initcheck").
set -uo pipefail
out=${1:?usage: tools/gpu_check.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
build=$root/build-gpu
jobs=${GPU_CHECK_JOBS:-$(nproc)}
export PATH=/usr/local/cuda/bin:$PATH
stages=" ${GPU_CHECK_STAGES:-build tests sanitizer bench perf cudaipc reducer powersgd nccltests peers python} "
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
note "gpu_check: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

# --- build -------------------------------------------------------------------------
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
  # GPU_CHECK_PREBUILT=1: build-gpu/ itself was carried; =DIR: the programs packed
  # into DIR by tools/pack_gpu_build.sh. RUNPATHs hold the development machine's
  # absolute build path: make it resolve here.
  if [[ "$GPU_CHECK_PREBUILT" == *.tar.gz ]]; then
    # The packed archive (tools/pack_gpu_build.sh): unpacked beside itself first.
    unpacked=${GPU_CHECK_PREBUILT%.tar.gz}
    if ! { mkdir -p "$root/$unpacked" && tar -xzf "$root/$GPU_CHECK_PREBUILT" -C "$root/$unpacked"; }; then
      note "BUILD: cannot unpack $GPU_CHECK_PREBUILT"
      exit 1
    fi
    GPU_CHECK_PREBUILT=$unpacked
  fi
  if [ "$GPU_CHECK_PREBUILT" != 1 ]; then
    carried=$root/$GPU_CHECK_PREBUILT
    [ -e "$build" ] || ln -s "$carried/build-gpu" "$build"
    export LD_LIBRARY_PATH=$carried/lib:${LD_LIBRARY_PATH:-}
  fi
  made_in=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt")
  if [ -n "$made_in" ] && [ "$made_in" != "$root" ] && [ ! -e "$made_in" ]; then
    mkdir -p "$(dirname "$made_in")" && ln -s "$root" "$made_in"
  fi
  note "build: prebuilt (made in ${made_in:-?})"
elif want build; then
  cfg=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHS:-90})
  [ -d "$root/.deps/googletest" ] && cfg+=(-DGRADCOMM_GTEST_SOURCE_DIR="$root/.deps/googletest")
  [ -d "$root/.deps/benchmark" ] && cfg+=(-DGRADCOMM_BENCHMARK_ROOT="$root/.deps/benchmark")
  [ -d "$root/.deps/nlohmann_json" ] && cfg+=(-Dnlohmann_json_DIR="$root/.deps/nlohmann_json/share/cmake/nlohmann_json")
  [ -d "$root/.deps/CLI11" ] && cfg+=(-DCLI11_DIR="$root/.deps/CLI11/share/cmake/CLI11")
  if ! { cmake "${cfg[@]}" && cmake --build "$build" -j"$jobs"; } >"$out/build.log" 2>&1; then
    note "BUILD FAILED (see build.log)"
    tail -30 "$out/build.log"
    exit 1
  fi
  note "build: ok"
fi
[ -f "$root/.deps/benchmark/lib/libbenchmark.so.1debian" ] && export LD_LIBRARY_PATH=$root/.deps/benchmark/lib:${LD_LIBRARY_PATH:-}
"$build/tools/gradcomm-info" >>"$out/env.txt" 2>&1
"$build/tools/gradcomm-info" --json >"$out/env.json" 2>&1 || note "gradcomm-info --json failed"

# --- tests -------------------------------------------------------------------------
want tests && {
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
  # ctest's test lists need this CMake's modules at the configure-time path, which a
  # carried build may not match: run the test programs themselves.
  echo "### test programs (prebuilt)" >>"$out/tests.log"  # appended: a second call into the same OUT keeps the first's
  failed=0 passed=0
  # run_logged LABEL LIMIT_S CMD...: one program into tests.log (without gtest's RUN/OK
  # lines), counted as passed or failed by its exit status.
  run_logged() {
    local label=$1 limit=$2; shift 2
    echo "=== $label" >>"$out/tests.log"
    timeout "$limit" "$@" 2>&1 | grep -vE '^\[ +(RUN|OK) +\]' >>"$out/tests.log"
    local rc=${PIPESTATUS[0]}
    echo "=== exit $rc" >>"$out/tests.log"
    if [ "$rc" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  }
  for t in $(find "$build/tests" -maxdepth 3 -type f -executable -name 'gradcomm_*tests' | sort); do
    [[ "$(basename "$t")" =~ ${GPU_CHECK_TESTS:-.} ]] || continue
    run_logged "$(basename "$t")" "${GPU_CHECK_TEST_LIMIT:-600}" "$t"
  done
  # The reducer's cases again with the epilogues fused at finalize (ctest's
  # *.epilogue_at_finalize): the GPU cases on the side stream, one launch per dtype.
  for suite in gradcomm_reducer_tests gradcomm_strategy_tests; do
    rtests=$build/tests/reducer/$suite
    [ -x "$rtests" ] && run_logged "$suite with GRADCOMM_REDUCER_EPILOGUE=finalize" 600 \
      env GRADCOMM_REDUCER_EPILOGUE=finalize "$rtests" --gtest_filter='*Gpu*'
  done
  # The C tutorial on the GPU (the examples are not GoogleTest programs).
  mlp=$build/examples/gradcomm_example_mlp
  if [ -x "$mlp" ]; then
    for extra in "" "--powersgd 2" "--sharded --adam --clip 0.05"; do
      # shellcheck disable=SC2086  # $extra is empty or several words
      run_logged "gradcomm_example_mlp --ranks 4 --steps 200 --gpu $extra" 300 "$mlp" --ranks 4 --steps 200 --gpu $extra
    done
  fi
  note "tests: $passed test programs passed, $failed failed ($(grep -h '^\[  PASSED  \]' "$out/tests.log" | awk '{s += $4} END {print s}') cases passed)"
  grep -E '^\[  FAILED  \]' "$out/tests.log" | sort -u | head -20 | tee -a "$summary"
  skipped=$(grep -hE '^\[  SKIPPED \] [0-9]+ test' "$out/tests.log" | awk '{s += $4} END {print s + 0}')
  note "tests skipped: $skipped"
else
  ctest --test-dir "$build" -j4 --output-on-failure --timeout 300 >"$out/tests.log" 2>&1
  note "tests: $(grep -E 'tests passed|tests failed' "$out/tests.log" | tail -1)"
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|Subprocess)" "$out/tests.log" | head -20 | tee -a "$summary"
  skipped=$(grep -c "(Skipped)" "$out/tests.log" || true)
  note "tests skipped: $skipped"
fi
}

# --- compute-sanitizer on the GPU tests --------------------------------------------
if want sanitizer && [ -z "${GPU_CHECK_SKIP_SANITIZER:-}" ] && command -v compute-sanitizer >/dev/null; then
  : >"$out/sanitizer.log"
  for t in $(find "$build/tests" -maxdepth 3 -type f -executable -name 'gradcomm_*tests' | sort); do
    # Only programs with GPU cases; NCCL's own probing (and our deliberate
    # out-of-memory tests) raise CUDA API errors that every call site checks.
    grep -q '^  ' <<< "$("$t" --gtest_list_tests --gtest_filter='*Gpu*' 2>/dev/null)" || continue
    [[ "$(basename "$t")" =~ ${GPU_CHECK_SANITIZE:-.} ]] || continue
    for tool in ${GPU_CHECK_SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
      echo "=== $tool $(basename "$t")" >>"$out/sanitizer.log"
      timeout 600 compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 99 "$t" \
        --gtest_filter='*Gpu*' >>"$out/sanitizer.log" 2>&1
      echo "=== exit $?" >>"$out/sanitizer.log"
    done
  done
  note "sanitizer: $(grep -c '=== exit 0' "$out/sanitizer.log") clean, $(grep -c '=== exit 99' "$out/sanitizer.log") with errors, $(grep -Ec '=== exit [^09]' "$out/sanitizer.log") other failures"
fi

# --- benchmarks ----------------------------------------------------------------------
benchdir=$(mktemp -d)
# Every Google Benchmark program's JSON and the benches' JSON lines, merged into
# bench.json; called after each program so that a call cut off at its time limit
# still brings back what ran (the 2026-11-25 session lost its kernel figures so).
merge_bench() {
  python3 - "$benchdir" "$out/bench.json" <<'PY'
import glob, json, os, sys
merged = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    merged[os.path.basename(f)[:-6]] = [json.loads(l) for l in open(f) if l.strip().startswith("{")]
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_bench*.txt"))):
    merged[os.path.basename(f)] = open(f, errors="replace").read()[-20000:]
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    try:
        merged[os.path.basename(f)[:-5]] = json.load(open(f))
    except Exception as e:
        merged[os.path.basename(f)[:-5]] = {"error": str(e)}
if merged:
    json.dump(merged, open(sys.argv[2], "w"), indent=1)
PY
}
merge_peers() {
  python3 - "$benchdir/peers.jsonl" "$benchdir/peers.err" "$out/peers.json" <<'PY'
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
}
want bench && for b in $(find "$build/bench" -maxdepth 3 -type f -executable -name 'gradcomm_*bench*' | sort); do
  name=$(basename "$b")
  [[ "$name" =~ ${GPU_CHECK_BENCHES:-.} ]] || continue
  timeout "${GPU_CHECK_BENCH_LIMIT:-600}" "$b" --benchmark_format=console --benchmark_out="$benchdir/$name.json" \
    --benchmark_out_format=json --benchmark_repetitions=${BENCH_REPS:-5} \
    --benchmark_report_aggregates_only=true ${BENCH_ARGS:-} >"$benchdir/$name.txt" 2>&1
  note "bench $name: exit $?"
  merge_bench
done

# --- gradcomm-perf -------------------------------------------------------------------
# gradcomm-perf's runs so far in perf.txt that found wrong values, into the summary.
# (nccl-tests prints the same line: a run is gradcomm-perf's after its version line.)
wrong_runs() {
  local counts
  counts=$(awk '/^# gradcomm-perf version/ {g = 1} /^# nccl-tests version/ {g = 0}
                g && /Out of bounds values/ {runs++; if (/FAILED/) bad++}
                END {print bad + 0, runs + 0}' "$out/perf.txt" 2>/dev/null || echo "0 0")
  note "perf: ${counts% *} of ${counts#* } gradcomm-perf runs found wrong values"
}
perf=$build/tools/perf/gradcomm-perf
if want perf && [ -x "$perf" ]; then
  {
    rm -f "$benchdir/perf_default.json"  # -J never overwrites (nccl-tests: it would write .0)
    echo "### gradcomm-perf (defaults)"; "$perf" -J "$benchdir/perf_default.json"
    echo "### gradcomm-perf -C 1 -z 3 -m 4 (CPU time, blocking per iteration, 4 calls per group)"
    "$perf" -C 1 -z 3 -m 4 -b 8 -e 1M -f 8
    echo "### gradcomm-perf -I 1 -K 2 -M 1 (per-iteration CUDA event timing, memory report)"
    "$perf" -I 1 -K 2 -M 1 -b 8 -e 64M -f 8
    echo "### gradcomm-perf -y 1 -u 3 -z 1 (legacy default stream, device buffers 3 elements off, blocking)"
    "$perf" -y 1 -u 3 -z 1 -b 8 -e 16M -f 8
    echo "### gradcomm-perf --local 4 (one GPU, 4 local ranks)"; "$perf" --local 4 -b 1M -e 256M -f 2
    for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
      echo "### gradcomm-perf --collective $c"; "$perf" --collective $c -b 8 -e 128M -f 4
    done
    echo "### JSON"; cat "$benchdir"/perf_default.json
    # Where a small call's host time goes (the gap to nccl-tests below 8 MiB).
    overhead=$build/bench/comm/gradcomm-call-overhead-bench
    if [ -x "$overhead" ]; then
      echo "### gradcomm-call-overhead-bench"; "$overhead" -J "$benchdir/call_overhead.jsonl"
      # Its GPU rows rotate: every call asking about both buffers, buffers known (the
      # default), flight recorder off (its cost on NCCL: target <= 0.1 us a call).
      "$overhead" --bytes 1048576
    fi
    if [ "$ngpus" -ge 2 ]; then  # NCCL through the store, one process per GPU
      echo "### gradcomm-perf, one process per GPU ($ngpus)"
      RUN_PROCESSES_TIMEOUT=400 examples/run_processes.sh "$ngpus" "$perf" -b 8 -e 128M -f 2
    fi
  } >>"$out/perf.txt" 2>&1
  note "perf: $(grep -m1 'Avg bus bandwidth' "$out/perf.txt")"
  wrong_runs  # the runs that counted wrong values (2026-11-27: 5 of 13, hidden from the summary)
  merge_bench
fi

# --- processes sharing one GPU (the cuda-ipc transport) -------------------------------
# Its test program (separate processes on GPU 0 against the host reference), then
# gradcomm-perf as 4 processes on GPU 0 against 4 local ranks (threads) on it,
# alternating (issue 33's target: within 1.2x at 1 MiB and 64 MiB), then every other
# collective as 4 processes with the values checked. Into tests.log and perf.txt.
if want cudaipc && [ -x "$perf" ]; then
  ipc_tests=$build/tests/comm/gradcomm_cuda_ipc_tests
  { echo "### gradcomm_cuda_ipc_tests"; timeout 400 "$ipc_tests"; } >>"$out/tests.log" 2>&1
  note "cuda-ipc tests: exit $?"
  { for round in 1 2; do
      echo "### gradcomm-perf --local 4 -b 1M -e 64M -f 8 (threads on GPU 0, round $round)"
      "$perf" --local 4 -b 1M -e 64M -f 8
      echo "### gradcomm-perf as 4 processes on GPU 0 -b 1M -e 64M -f 8 (cuda-ipc, round $round)"
      RUN_PROCESSES_TIMEOUT=200 examples/run_processes.sh 4 "$perf" -b 1M -e 64M -f 8
    done
    for c in all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
      echo "### gradcomm-perf --collective $c as 4 processes on GPU 0 (cuda-ipc)"
      RUN_PROCESSES_TIMEOUT=200 examples/run_processes.sh 4 "$perf" --collective $c -b 8 -e 16M -f 16
    done
  } >>"$out/perf.txt" 2>&1
  note "cuda-ipc perf: exit $?"
  wrong_runs
  # Training through failures on GPU 0 (issue 46): 3 members over cuda-ipc, the one
  # that is rank 1 killed at step 20 and restarted; every member must end identical.
  { echo "### examples/run_fault_tolerant.sh 3 ... --gpu --die 20:1 (cuda-ipc)"
    FT_TIMEOUT=200 timeout 300 examples/run_fault_tolerant.sh 3 "$build/tools/gradcomm-store" \
      "$build/examples/gradcomm_example_ft" --gpu --min-ranks 3 --steps 200 --step-ms 2 --die 20:1 --payload 16
  } >>"$out/tests.log" 2>&1
  note "fault tolerance on GPU 0 (cuda-ipc): exit $? ($(grep -c 'verdict: ok' "$out/tests.log") ok)"
fi

# --- reducer step -------------------------------------------------------------------
rbench=$build/bench/comm/gradcomm-reducer-bench
if want reducer && [ -x "$rbench" ]; then
  { echo "### gradcomm-reducer-bench (defaults)"; timeout 500 "$rbench" -J "$benchdir/reducer.jsonl"; } >>"$out/perf.txt" 2>&1
  note "reducer bench: exit $? ($(wc -l <"$benchdir/reducer.jsonl" 2>/dev/null || echo 0) rows)"
  merge_bench
  # Step timing and the step trace on the GPU (CUDA events): the overlap lines and a
  # trace of two steps (merged into bench.json as "reducer_trace"), plus the timing's
  # cost: the same configuration with GRADCOMM_REDUCER_TIMING=0 and =1.
  # NCCL with one rank, as the reducer's default table: its all-reduce moves nothing,
  # so the step is the reducer's own cost (a local transport of one rank copies the
  # bucket, which hid the host-side differences below on 2026-11-27).
  one_gpu=(--device gpu --transport nccl --ranks 1 --iters 20)
  { for round in 1 2; do
      for timing in 0 1; do
        echo "### gradcomm-reducer-bench gpt2_medium, GRADCOMM_REDUCER_TIMING=$timing (round $round)"
        GRADCOMM_REDUCER_TIMING=$timing timeout 120 "$rbench" --set gpt2_medium "${one_gpu[@]}" | tail -1
      done
    done
    # The per-bucket epilogue against one fused epilogue at finalize, alternating, on
    # the copying configurations that got slower between 55b4189 and ec15685 (docs/gpu.md).
    for round in 1 2; do
      for epilogue in bucket finalize; do
        for set in gpt2_medium resnet50; do
          echo "### gradcomm-reducer-bench $set, GRADCOMM_REDUCER_EPILOGUE=$epilogue (round $round)"
          GRADCOMM_REDUCER_EPILOGUE=$epilogue timeout 120 "$rbench" --set $set "${one_gpu[@]}" | tail -1
        done
      done
    done
    echo "### step timing and trace (TRACE lines of the last steps)"
    GRADCOMM_REDUCER_TIMING=1 GRADCOMM_TRACE_FILE="$benchdir/reducer_trace.json" GRADCOMM_TRACE_START=5 \
      GRADCOMM_TRACE_STEPS=2 GRADCOMM_DEBUG=TRACE GRADCOMM_DEBUG_SUBSYS=REDUCER \
      timeout 120 "$rbench" --set gpt2_medium --device gpu --ranks 2 --iters 8 2>&1 | grep -E "timing:|trace" | tail -6
  } >>"$out/perf.txt" 2>&1
  note "reducer step timing on the GPU: exit $?"
  merge_bench
  if [ "$ngpus" -ge 2 ]; then  # the issue's target: overhead over a multi-GPU NCCL all-reduce
    { echo "### gradcomm-reducer-bench, one process per GPU ($ngpus)"
      RUN_PROCESSES_TIMEOUT=500 examples/run_processes.sh "$ngpus" "$rbench" -J "$benchdir/reducer_processes.jsonl"
    } >>"$out/perf.txt" 2>&1
    note "reducer bench, $ngpus processes: exit $?"
  fi
fi

# --- PowerSGD through the reducer ------------------------------------------------------
pbench=$build/bench/comm/gradcomm-powersgd-bench
if want powersgd && [ -x "$pbench" ]; then
  { echo "### gradcomm-powersgd-bench (defaults)"; timeout 400 "$pbench" -J "$benchdir/powersgd.jsonl"; } >>"$out/perf.txt" 2>&1
  note "powersgd bench: exit $? ($(wc -l <"$benchdir/powersgd.jsonl" 2>/dev/null || echo 0) rows)"
  merge_bench
  # The per-bucket plan against every compressed matrix in one bucket (ec15685's
  # layout), alternating: how much of GPT-2 medium's step the bucket split costs.
  for round in $(seq "${GPU_CHECK_POWERSGD_ROUNDS:-2}"); do
    for cap in 25 4096; do
      { echo "### gradcomm-powersgd-bench gpt2_medium, 1 rank, --bucket-cap-mib $cap (round $round)"
        timeout 120 "$pbench" --set gpt2_medium --ranks 1 --bucket-cap-mib $cap -J "$benchdir/powersgd_cap_$cap.$round.jsonl"
      } >>"$out/perf.txt" 2>&1
    done
  done
  note "powersgd bucket cap A/B: exit $?"
  merge_bench
  # Where GPT-2 medium's PowerSGD step goes, bucket by bucket (its step doubled between
  # ec15685 and 0edc4a0, when the matrices spread over the buckets): a trace of two
  # steps, merged into bench.json as "powersgd_trace".
  { echo "### gradcomm-powersgd-bench gpt2_medium, 1 rank, traced (TRACE lines)"
    GRADCOMM_REDUCER_TIMING=1 GRADCOMM_TRACE_FILE="$benchdir/powersgd_trace.json" GRADCOMM_TRACE_START=3 \
      GRADCOMM_TRACE_STEPS=2 GRADCOMM_DEBUG=TRACE GRADCOMM_DEBUG_SUBSYS=REDUCER \
      timeout 120 "$pbench" --set gpt2_medium --ranks 1 --iters 5 2>&1 | grep -E "timing:|trace" | tail -4
  } >>"$out/perf.txt" 2>&1
  merge_bench
fi
# Its two products against cuBLAS (per matrix, and grouped), on the same matrices.
cbench=$build/bench/comm/gradcomm-powersgd-cublas-bench
if want powersgd && [ -x "$cbench" ]; then
  { echo "### gradcomm-powersgd-cublas-bench"; timeout 300 "$cbench" -J "$benchdir/powersgd_cublas.jsonl"; } >>"$out/perf.txt" 2>&1
  note "powersgd cuBLAS comparison: exit $? ($(wc -l <"$benchdir/powersgd_cublas.jsonl" 2>/dev/null || echo 0) rows)"
  merge_bench
fi

# --- nccl-tests against gradcomm-perf, same sizes and flags ----------------------------
# .nccl-tests/build/*_perf are built on the development machine from the nccl-tests
# sources (kept out of the repository) and carried.
ncclt_dir=$root/.nccl-tests/build
[ -n "${GPU_CHECK_PREBUILT:-}" ] && [ -x "$root/${GPU_CHECK_PREBUILT}/all_reduce_perf" ] && ncclt_dir=$root/$GPU_CHECK_PREBUILT
if want nccltests && [ -x "$ncclt_dir/all_reduce_perf" ] && [ -x "$perf" ]; then
  {
    for c in all_reduce all_gather reduce_scatter; do
      [ -x "$ncclt_dir/${c}_perf" ] || continue
      # Twice each, alternating, so that a clock or neighbour drift shows as spread.
      for round in 1 2; do
        echo "### nccl-tests ${c}_perf -b 8 -e 128M -f 2 -g 1 (round $round)"
        "$ncclt_dir/${c}_perf" -b 8 -e 128M -f 2 -g 1 -w 20 -n 100
        echo "### gradcomm-perf --collective $c -b 8 -e 128M -f 2 -g 1 (round $round)"
        "$perf" --collective $c -b 8 -e 128M -f 2 -g 1 -w 20 -n 100
      done
    done
  } >>"$out/perf.txt" 2>&1
  note "nccl-tests comparison: exit $?"
  wrong_runs
fi

# --- peers (PyTorch, NCCL) -----------------------------------------------------------
: >"$benchdir/peers.jsonl"; : >"$benchdir/peers.err"
want peers && for p in $(find "$root/bench" -name '*peer*.py' | sort); do
  # Default: the GPU peers (the others are host-process peers that take minutes).
  [[ "$(basename "$p")" =~ ${GPU_CHECK_PEERS:-torch_(kernels|alloc|powersgd|ddp)_peer} ]] || continue
  timeout 900 python3 "$p" >>"$benchdir/peers.jsonl" 2>>"$benchdir/peers.err"
  note "peer $(basename "$p"): exit $?"
  merge_peers
done

# --- the Python package on the GPU ----------------------------------------------------
# The wheel is built on the development machine (no network here):
#   pip wheel --no-deps -w .whl/ ./python   (GRADCOMM_PREFIX=<an install of build-gpu>)
# and carried in .whl/; its tests, CUDA cases included. (bench/comm/torch_ddp_train_peer.py
# measures the wrapper against DDP on the CPU only so far.)
if want python; then
  wheel=$(ls "$root"/.whl/gradcomm-*.whl 2>/dev/null | head -1)
  if [ -z "$wheel" ]; then
    note "python: no .whl/gradcomm-*.whl carried: skipped"
  else
    python3 -m pip install -q --no-deps --force-reinstall "$wheel" >>"$out/tests.log" 2>&1
    # Lightning from wheels carried in .whl/lightning (the GPU machine has no network; docs/gpu.md).
    [ -d "$root/.whl/lightning" ] && python3 -m pip install -q --no-index --find-links "$root/.whl/lightning" \
      lightning >>"$out/tests.log" 2>&1
    (cd "$root/python/tests" && timeout 600 python3 -m pytest -q -p no:cacheprovider test_torch_cuda.py \
      test_torch_bad_input.py test_lowlevel.py test_bindings.py test_import_order.py test_lightning.py \
      -k 'not test_lightning or gpu') >>"$out/tests.log" 2>&1
    note "python: pytest exit $? (tests.log)"
    # The DDP wrapper with a membership on GPU 0 (issue 46): 3 members over cuda-ipc,
    # the one that is rank 1 killed in its backward and restarted; all end identical.
    { echo "### run_fault_tolerant.sh 3 ... ft_train_torch.py --device cuda:0 --die 10:1 (cuda-ipc)"
      FT_TIMEOUT=200 timeout 300 examples/run_fault_tolerant.sh 3 "$build/tools/gradcomm-store" python3 \
        examples/ft_train_torch.py --device cuda:0 --min-ranks 3 --steps 60 --final-world 3 --die 10:1 \
        --compression powersgd
    } >>"$out/tests.log" 2>&1
    note "python: fault-tolerant DDP wrapper on GPU 0: exit $?"
  fi
fi


echo "=== summary"
cat "$summary"
