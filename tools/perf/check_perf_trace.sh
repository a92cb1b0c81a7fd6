#!/usr/bin/env bash
# Usage: check_perf_trace.sh PERF — issue 19: GRADCOMM_DEBUG=TRACE on a 2-process
# gradcomm-perf run printed no TRACE line. Now, with GRADCOMM_DEBUG_FILE=<dir>/%r.log,
# each rank's file holds its INFO lines (communicator created and destroyed, with
# its rank) and one TRACE [COLL] line per collective it ran; GRADCOMM_DEBUG_SUBSYS
# leaves out what it excludes.
set -euo pipefail
perf=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*; do echo "== $f"; head -20 "$f"; done; exit 1; }
run() {  # run SUBSYS
  local port pids=()
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GRADCOMM_TIMEOUT_S=60 \
      GRADCOMM_DEBUG=TRACE GRADCOMM_DEBUG_SUBSYS=$1 GRADCOMM_DEBUG_FILE="$dir/%r.log" \
      timeout 120 "$perf" -b 8 -e 64 -f 8 -n 2 -w 1 -c 1 > "$dir/out$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || fail "a rank exited $?"; done
}
run ALL
for r in 0 1; do
  f=$dir/$r.log
  [ -s "$f" ] || fail "no $f"
  grep -q "^[^ ]*:$r gradcomm INFO \[INIT\] communicator created: rank $r of 2, shm transport on host" "$f" ||
    fail "rank $r: no creation line"
  grep -q "gradcomm INFO \[INIT\] communicator destroyed: rank $r of 2" "$f" || fail "rank $r: no destruction line"
  grep -q "gradcomm TRACE \[COLL\] all-reduce #[0-9]* of 8 bytes (f32, sum) completed in" "$f" ||
    fail "rank $r: no TRACE line for the 8-byte all-reduce"
  grep -q "gradcomm TRACE \[COLL\] all-reduce #[0-9]* of 64 bytes" "$f" || fail "rank $r: no line for 64 bytes"
  ! grep -v "gradcomm" "$f" | grep -q . || fail "rank $r: a line that is not a log line"
done
# Both ranks ran the same collectives: as many COLL lines each.
[ "$(grep -c 'TRACE \[COLL\]' "$dir/0.log")" = "$(grep -c 'TRACE \[COLL\]' "$dir/1.log")" ] || fail "COLL counts differ"
rm -f "$dir"/*.log
run ^COLL
grep -q "INFO \[INIT\] communicator created" "$dir/0.log" || fail "^COLL dropped INIT"
! grep -q "\[COLL\]" "$dir/0.log" || fail "^COLL kept COLL lines"
echo "TRACE lines per rank and collective, per-rank files, subsystem filter: ok"
