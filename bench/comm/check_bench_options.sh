#!/usr/bin/env bash
# Usage: check_bench_options.sh PROGRAM... — the bench programs' command lines (CLI11,
# as gradcomm-perf): --help exits 0; a malformed or out-of-range value, a missing
# value and an unknown option exit 2 with the reason; an unwritable -J file exits 2
# before anything runs. They used to take '--iters 1x' as 1, 'abc' as 0 (atoi), read
# past argv on a missing value, ignore --help, and lose a -J file they could not open.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
refused() {  # PROGRAM NEEDLE ARGS...: exit 2 naming NEEDLE
  local prog=$1 needle=$2; shift 2
  local out; out=$(timeout 60 "$prog" "$@" 2>&1); local rc=$?
  [ $rc -eq 2 ] || fail "$(basename "$prog") $* exited $rc, not 2: $out"
  grep -qF -- "$needle" <<< "$out" || fail "$(basename "$prog") $*: no '$needle' in: $out"
}
for prog in "$@"; do
  name=$(basename "$prog")
  out=$(timeout 60 "$prog" --help 2>&1) || fail "$name --help exited $?: $out"
  grep -qF -- "-J" <<< "$out" || fail "$name --help does not list -J: $out"
  count=--iters
  [ "$name" = gradcomm-call-overhead-bench ] && count=--calls
  refused "$prog" "Run $name --help" --bogus
  refused "$prog" "$count: Value 1x not in range" $count 1x
  refused "$prog" "$count: Value abc not in range" $count abc
  refused "$prog" "$count: 1 required" $count
  case $name in
    gradcomm-call-overhead-bench) refused "$prog" "--bytes: Value 2 not in range" --bytes 2 ;;
    gradcomm-powersgd-cublas-bench) refused "$prog" "--rank: Value 0 not in range" --rank 0 ;;
    *) refused "$prog" "--set: mnist not in" --set mnist ;;
  esac
  # -J before the run (the cuBLAS comparison needs a GPU before it opens anything).
  if [ "$name" != gradcomm-powersgd-cublas-bench ]; then
    refused "$prog" "cannot write /nonexistent-dir/x.json" $count 1 -J /nonexistent-dir/x.json
  fi
  echo "$name: ok"
done
echo "bench options: ok"
