#!/usr/bin/env bash
# Usage: check_desync.sh LOCAL_TESTS DESYNC_TOOL — issue 19: the flight records of
# a job where one rank froze, and of one where the ranks called different
# collectives, read by tools/gradcomm_desync.py: its report names the collective,
# the rank that never entered it, and the calls that differ, in words.
set -uo pipefail
tests=$1 tool=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
GRADCOMM_FLIGHT_TEST_DIR=$dir "$tests" --gtest_filter='FlightRecord.AFrozen*:FlightRecord.CallsThatDiffer*:FlightRecord.ASend*' \
  > "$dir/gtest.log" 2>&1 || { cat "$dir/gtest.log"; echo "FAIL: the recording tests failed"; exit 1; }
out=$(python3 "$tool" "$dir/frozen"); rc=$?
[ "$rc" = 1 ] || fail "exit $rc for a frozen rank, not 1"
grep -q "all-reduce #4 (256 f32, sum): entered by ranks 0, 1; never entered by rank 2" <<< "$out" || fail "no 'never entered' line"
grep -q "rank 2 stopped after all-reduce #3" <<< "$out" || fail "no 'stopped after' line"
grep -qE "rank [01] failed: gcomm(Timeout|RemoteError): all-reduce #4 of 1024 bytes: .*rank 2 never arrived" <<< "$out" || fail "no failure line"
echo "$out"
out=$(python3 "$tool" "$dir/mismatch/rank0.json" "$dir/mismatch/rank1.json"); rc=$?
[ "$rc" = 1 ] || fail "exit $rc for a mismatch, not 1"
grep -q "collective #2 differs between ranks: rank 0 called all-reduce #2 (64 f32, sum); rank 1 called all-reduce #2 (32 f32, sum)" <<< "$out" ||
  fail "no mismatch line"
echo "$out"
# A send whose receive never came: the pending send names what its peer did.
out=$(python3 "$tool" "$dir/p2p"); rc=$?
[ "$rc" = 1 ] || fail "exit $rc for a send without its receive, not 1"
grep -q "rank 0: send #2 (16 f32 to rank 1) failed (rank 1 entered 1 receive(s) from rank 0; this is send 2 to it" <<< "$out" ||
  fail "no line naming the unmatched send"
echo "$out"
out=$(python3 "$tool" "$dir/nothing-here" 2>&1); rc=$?
[ "$rc" = 2 ] || fail "exit $rc without records, not 2"
echo "desync reports: ok"
