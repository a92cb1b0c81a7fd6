#!/usr/bin/env bash
# Usage: check_perf_flags.sh PERF — gradcomm-perf's options against nccl-tests'
# documented meanings (nccl-tests 2.19's common.cu usage text), one row each:
# accepted forms, what each does to the header, the table and the JSON, and the
# options gradcomm cannot honour refused with exit code 2 and the reason.
set -uo pipefail
perf=$1
here=$(dirname "$0")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
run() { env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" --local 2 -n 1 -w 0 "$@" 2>&1; }
has() { grep -qF -- "$2" <<< "$1" || fail "$3: no '$2' in: $1"; }
rows() { grep -cE '^ +[0-9]+ +[0-9]+ ' <<< "$1"; }

# Sizes: nccl-tests' short forms with attached values and long forms with '='.
out=$(run -b8 -e1K -f2) || fail "-b8 -e1K: $out"
[ "$(rows "$out")" -eq 8 ] || fail "-b8 -e1K -f2 did not give 8 rows: $out"
out=$(run --minbytes=8 --maxbytes=64 --stepfactor=2) || fail "--minbytes=8: $out"
[ "$(rows "$out")" -eq 4 ] || fail "--minbytes=8 --maxbytes=64: $out"
out=$(run -b 8 -e 1K -e 16) || fail "-e twice: $out"
[ "$(rows "$out")" -eq 2 ] || fail "-e 1K -e 16: the last -e must win, as with getopt: $out"
out=$(run -b 8 -e 32 -i 8) || fail "-i 8: $out"
has "$out" "step: 8(bytes)" "-i"
# -c N: N check rounds; -c 0: no check and #wrong is N/A (nwrong null in the JSON).
out=$(run -b 8 -e 8 -c 3) || fail "-c 3: $out"
has "$out" "validation: 3" "-c 3"
out=$(run -b 8 -e 8 -c 0 -J "$dir/c0.json") || fail "-c 0: $out"
has "$out" "N/A" "-c 0"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; assert r['out_of_place']['nwrong'] is None, r" "$dir/c0.json" || fail "-c 0 JSON"
# -z 0..3: the blocking modes and their header lines; 4 is refused.
has "$(run -b 8 -e 8 -z 1)" "wait and barrier after each inner iteration (-m)" "-z 1"
has "$(run -b 8 -e 8 -z 2)" "wait after each inner iteration (-m), no barrier" "-z 2"
has "$(run -b 8 -e 8 -z 3)" "wait and barrier after each outer iteration (-n); time excludes barrier" "-z 3"
out=$(run -b 8 -e 8 -z 4); [ $? -eq 2 ] || fail "-z 4 accepted: $out"
# -C 1: CPU time (the column says cputime, the JSON cpu_time); -S 1: a timestamp per row.
out=$(run -b 8 -e 8 -C 1 -J "$dir/cpu.json") || fail "-C 1: $out"
has "$out" "cputime" "-C 1"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results'][0]; assert 'cpu_time' in r['in_place'], r" "$dir/cpu.json" || fail "-C 1 JSON"
out=$(run -b 8 -e 8 -S 1) || fail "-S 1: $out"
grep -qE '[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$' <<< "$out" || fail "-S 1: no timestamp: $out"
# -m: collectives per iteration in one group; -N: cycles; -u: misaligned buffers; -y, -T, -p 0.
has "$(run -b 8 -e 64 -m 3)" "agg iters: 3" "-m 3"
out=$(run -b 8 -e 16 -N 3) || fail "-N 3: $out"
[ "$(rows "$out")" -eq 6 ] || fail "-N 3 did not print the sweep three times: $out"
out=$(run -b 8 -e 4K -u 3 -c 2) || fail "-u 3: $out"
has "$out" "unalign: 3" "-u 3"; has "$out" "Out of bounds values : 0 OK" "-u 3"
for ok in "-y 1" "-T 30" "-p 0" "-G 0" "-R 0" "-a 0" "-t 2"; do
  # shellcheck disable=SC2086
  out=$(run -b 8 -e 8 $ok) || fail "$ok refused: $out"
done
# -I 1: every iteration timed; i_min, i_max, i_p99, i_cv% after each half's #wrong, and
# per-iteration objects in the JSON (-K leading iterations left out of the summary).
out=$(env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" --local 3 -b 8 -e 64 -n 4 -w 0 -I 1 -K 1 \
      -J "$dir/iter.json" 2>&1) || fail "-I 1: $out"
has "$out" "# Per-Iteration Report: host clock timing; i_* uses max over process rows; summary skips first 1 iterations" "-I 1"
has "$out" "i_p99" "-I 1"
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ ' <<< "$out")" -eq 4 ] || fail "-I 1: not 4 rows: $out"
[ "$(grep -E '^ +8 +2 ' <<< "$out" | wc -w)" -eq 21 ] || fail "-I 1: a row without 8 more columns: $out"
python3 "$here/check_perf_json.py" "$dir/iter.json" 3 4 > /dev/null || fail "-I 1 JSON layout"
python3 - "$dir/iter.json" <<'PY' || fail "-I 1 JSON per-iteration objects"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["per_iter_timing"] == "true" and d["config"]["per_iter_skip"] == 1, d["config"]
for r in d["results"]:
    for half in ("out_of_place_per_iter", "in_place_per_iter"):
        p = r[half]
        assert p["skipped_iterations"] == 1 and len(p["times_us"]) == 4, p
        assert len(p["per_process_max_times_us"]) == 3, p      # one row per rank
        rows = p["per_process_max_times_us"]
        assert all(abs(t - max(row[i] for row in rows)) < 1e-3 * max(1, t) for i, t in enumerate(p["times_us"])), p
        kept = sorted(p["times_us"][1:])
        assert abs(p["min_us"] - kept[0]) < 1e-6 * max(1, kept[0]) and abs(p["max_us"] - kept[-1]) < 1e-6 * max(1, kept[-1]), p
        assert p["min_us"] <= p["p50_us"] <= p["p95_us"] <= p["p99_us"] <= p["max_us"], p
PY
# -M 1: the memory report after the footer, and in the JSON.
out=$(run -b 8 -e 1M -M 1 -J "$dir/mem.json") || fail "-M 1: $out"
grep -qE '^# Host memory usage    : Initialization .* \| User-Allocated .* \| Collective .* \| Total  ' <<< "$out" ||
  fail "-M 1: no memory line: $out"
python3 -c "import json,sys; m=json.load(open(sys.argv[1]))['gradcomm']['memory']; assert m['device']=='host' and m['user_allocated_bytes'] >= 4*2**20, m" "$dir/mem.json" ||
  fail "-M 1 JSON"
# -d / -o: every type or op with "all"; what gradcomm does not reduce is refused with the reason.
out=$(run -b 8 -e 8 -d all) || fail "-d all: $out"
for t in float half bfloat16; do has "$out" " $t " "-d all"; done
out=$(run -b 8 -e 8 -o all) || fail "-o all: $out"
for o in sum avg max min; do has "$out" " $o " "-o all"; done
expect_refused() {  # NEEDLE ARGS...
  local needle=$1; shift
  local out; out=$(run -b 8 -e 8 "$@"); local rc=$?
  [ $rc -eq 2 ] || fail "$* exited $rc, not 2: $out"
  has "$out" "$needle" "$*"
}
expect_refused "float, half and bfloat16 gradients only" -d double
expect_refused "gradients are never multiplied" -o prod
expect_refused "CUDA graph capture" -G 2
expect_refused "does not register buffers" -R 1
expect_refused "CTA policy" -x 1
expect_refused "no device-side collectives" -D 1
expect_refused "no device-side collectives" -V 16
expect_refused "--per_iter_timing: Value 2 not in range 0 to 1" -I 2
expect_refused "--memory: Value 2 not in range 0 to 1" -M 2
expect_refused "per-iteration skip needs -I 1" -K 1
expect_refused "must be below the iterations (-n 1)" -I 1 -K 1
expect_refused "-p 1" -p 1
expect_refused "not expected: --bogus" --bogus
expect_refused "--collective" --collective all_to_all
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt 2 ]; then
  out=$(env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" -t 2 -g 1 -b 8 -e 8 2>&1)
  [ $? -eq 2 ] || fail "-t 2 -g 1 with fewer than 2 GPUs was accepted: $out"
  has "$out" "-t 2 -g 1 asks for 2 GPU(s)" "-t 2 -g 1"
fi
# -J: nccl-tests' layout; an existing file is kept and the next name taken (file.0);
# an unwritable path is refused before the sweep, not after it.
out=$(run -b 8 -e 64 -J "$dir/out.json") || fail "-J: $out"
python3 "$here/check_perf_json.py" "$dir/out.json" 2 4 > /dev/null || fail "-J layout"
out=$(run -b 8 -e 64 -J "$dir/out.json") || fail "-J again: $out"
has "$out" "Writing JSON output to $dir/out.json.0" "-J on an existing file"
python3 "$here/check_perf_json.py" "$dir/out.json.0" 2 4 > /dev/null || fail "-J .0 layout"
out=$(run -b 8 -e 64 -J "$dir/no/such/dir/x.json"); rc=$?
[ $rc -eq 2 ] || fail "unwritable -J exited $rc: $out"
has "$out" "No such file or directory" "unwritable -J"
[ "$(rows "$out")" -eq 0 ] || fail "unwritable -J: the sweep ran first: $out"
# -r: the root of broadcast and reduce, in the root column; a root that is not a rank is refused.
for c in broadcast reduce; do
  out=$(run -b 8 -e 64 -r 1 -c 2 --collective $c) || fail "-r 1 --collective $c: $out"
  grep -qE '^ +8 +2 +float +(none|sum) +1 ' <<< "$out" || fail "-r 1 --collective $c: no root 1 in the row: $out"
  has "$out" "Out of bounds values : 0 OK" "-r 1 --collective $c"
done
out=$(run -b 8 -e 8 -r 2 --collective broadcast); [ $? -ne 0 ] || fail "-r 2 with 2 ranks accepted: $out"
has "$out" "root 2 is not a rank (0..1)" "-r 2"
# -h: the usage, exit 0.
out=$("$perf" -h) || fail "-h exited non-zero"
has "$out" "--report_cputime" "-h"
echo "gradcomm-perf flags: ok"
