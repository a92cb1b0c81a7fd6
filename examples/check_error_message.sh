#!/usr/bin/env bash
# Usage: check_error_message.sh MLP — a failed call is reported once, by the C
# function the library names, with the status in brackets (issue 19: it read
# "gcommCommInitFromEnv: gcommInvalidArgument: gcommCommInitFromEnv: MASTER_ADDR
# is not set"), and never as a source expression.
set -uo pipefail
mlp=$1
out=$(env -u MASTER_ADDR -u MASTER_PORT -u GRADCOMM_MASTER_PORT -u TORCHELASTIC_RUN_ID -u OMPI_COMM_WORLD_SIZE \
      -u SLURM_NTASKS -u SLURM_PROCID RANK=1 WORLD_SIZE=2 "$mlp" --steps 1 2>&1)
rc=$?
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "a world of 2 without MASTER_ADDR exited 0"
[ "$(grep -o gcommCommInitFromEnv <<< "$out" | wc -l)" -eq 1 ] || fail "the function is not named exactly once"
grep -q "MASTER_ADDR is not set" <<< "$out" || fail "the reason is missing"
grep -q "(gcommInvalidArgument)" <<< "$out" || fail "the status is missing"
! grep -q "&" <<< "$out" || fail "a source expression was printed"
echo "ok: $out"
