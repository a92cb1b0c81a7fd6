#!/usr/bin/env bash
# Usage: check_perf_bad_input.sh PERF — gradcomm-perf refuses, with exit code 2
# and the reason, a malformed launcher environment (issue 17 #8: it used to run a
# local sweep and exit 0) and sizes it cannot test (#9: 1e30, inf, 2^64-1 and
# 99999999999G printed one 0-byte row and exited 0; nan blamed the allocation).
set -uo pipefail
perf=$1
fail() { echo "FAIL: $*"; exit 1; }
expect_refused() {  # [ENV=VALUE...] [-- ARGS...] NEEDLE
  local needle=${*: -1}
  local out rc
  local envs=() args=(-b 8 -e 8)
  local rest=("${@:1:$#-1}")
  for ((k = 0; k < ${#rest[@]}; ++k)); do
    if [ "${rest[k]}" = "--" ]; then args=("${rest[@]:k+1}"); break; fi
    envs+=("${rest[k]}")
  done
  out=$(env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID ${envs[@]+"${envs[@]}"} \
        "$perf" "${args[@]}" -n 1 -w 0 2>&1); rc=$?
  [ "$rc" -eq 2 ] || fail "$* exited $rc, not 2: $out"
  grep -qF -- "$needle" <<< "$out" || fail "$*: the message lacks '$needle': $out"
}
expect_refused RANK=1 WORLD_SIZE=abc "WORLD_SIZE='abc'"
expect_refused RANK=1 WORLD_SIZE=0 "WORLD_SIZE='0'"
expect_refused RANK=1 WORLD_SIZE=-2 "WORLD_SIZE='-2'"
expect_refused RANK=1 WORLD_SIZE= "WORLD_SIZE is not set although RANK is"
expect_refused RANK=1 "WORLD_SIZE is not set although RANK is"
expect_refused RANK=1 WORLD_SIZE=2x "WORLD_SIZE='2x'"
expect_refused RANK=2 WORLD_SIZE=2 "RANK=2 is not below WORLD_SIZE=2"
expect_refused OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=x "OMPI_COMM_WORLD_SIZE='x'"
for size in 1e30 inf nan -1 18446744073709551615 99999999999G 8x abc; do
  expect_refused -- -b 8 -e "$size" "-e: '$size'"
  expect_refused -- -b "$size" -e 8 "-b: '$size'"
done
expect_refused -- -b 8 -e 1e30 -f 2 "larger than any buffer"
expect_refused -- -b 0 -e 64 "-b 0 with a step factor"
expect_refused -- -b 64 -e 8 "invalid sizes for 'minbytes' and 'maxbytes': 64 > 8"
expect_refused -- -b 8 -e 64 -f 2x "-f: '2x'"
expect_refused -- -b 8 -e 64 -f inf "-f: 'inf'"
expect_refused -- -b 8 -e 64 -i 0 "a step of 0 bytes"
# A step sweep may start at 0; a factor far past maxbytes ends the sweep.
out=$(env -u RANK -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" -b 0 -e 16 -i 8 -n 1 -w 0 2>&1) \
  || fail "-b 0 -i 8 was refused: $out"
[ "$(grep -cE '^ +(0|8|16) ' <<< "$out")" -eq 3 ] || fail "-b 0 -e 16 -i 8 did not give 3 rows: $out"
out=$(env -u RANK -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" -b 8 -e 64 -f 1e300 -n 1 -w 0 2>&1) \
  || fail "-f 1e300 was refused: $out"
[ "$(grep -cE '^ +8 ' <<< "$out")" -eq 1 ] || fail "-f 1e300 did not give one row: $out"
out=$(env -u RANK -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" -b 8 -e 12 -f 1.1 -n 1 -w 0 2>&1) \
  || fail "-f 1.1 was refused: $out"
[ "$(grep -cE '^ +(8|9|10|11|12) ' <<< "$out")" -eq 5 ] || fail "-b 8 -e 12 -f 1.1 did not give 8..12: $out"
out=$(env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID RANK=0 WORLD_SIZE=1 "$perf" -b 8 -e 8 -n 1 -w 0 2>&1) \
  || fail "a world of one was refused: $out"
echo "bad input checks: ok"
