#!/usr/bin/env bash
# Usage: check_verdict_lines.sh MLP — each criterion of the example's verdict is on
# its own line, so a FAIL names the one that failed: 20 steps are too few for the
# loss to halve, while the ranks still match one process (issue 32: the line read
# "largest relative difference ...: 2.76e-06 (limit 1e-02: FAIL)").
set -uo pipefail
mlp=$1
out=$("$mlp" --ranks 2 --steps 20 2>&1)
rc=$?
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
[ "$rc" -eq 1 ] || fail "20 steps exited $rc, not 1"
grep -q "largest relative difference of the loss curves: .* (limit 1e-02: ok)$" <<< "$out" ||
  fail "the curves' difference is not reported as ok on its own line"
grep -q "must at least halve in 20 steps: FAIL; train more steps" <<< "$out" || fail "the halving criterion is not named"
echo "ok"
