#!/usr/bin/env bash
# Usage: measure.sh BUILD_DIR — small all-reduce latency on the local and socket
# transports and the reducer soak (300 steps), each idle and with two busy-loop
# processes keeping both cores of the 2-core VM busy (a stand-in for data-loader
# workers). Prints one line per run; see README.md.
set -uo pipefail
b=$1
repo=$(cd "$(dirname "$0")/../../.." && pwd)
perf=$b/tools/perf/gradcomm-perf
soak=$b/tests/comm/gradcomm_reducer_soak_tests
hogs=()
load_on() { for i in 1 2; do (while :; do :; done) & hogs+=($!); done; sleep 0.5; }
load_off() { kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null; hogs=(); }
# out-of-place / in-place time (us) of an 8-byte all-reduce, mean over ranks
row() { grep -E "^ +8 " | head -1 | awk '{printf "%s/%s ", $6, $10}'; }
local_lat() { for k in 1 2 3; do timeout 120 "$perf" --local "$1" -b 8 -e 8 -n 500 -w 50 2>/dev/null | row; done; }
socket_lat() { for k in 1 2 3; do timeout 120 "$repo/examples/run_processes.sh" "$1" "$perf" -b 8 -e 8 -n 500 -w 50 2>/dev/null | row; done; }
soak_s() { /usr/bin/time -f %e env GRADCOMM_SOAK_STEPS=300 timeout 300 "$soak" 2>&1 >/dev/null | tail -1; }
for load in idle busy; do
  [ "$load" = busy ] && load_on
  echo "$load local 2 ranks: $(local_lat 2)"
  echo "$load local 3 ranks: $(local_lat 3)"
  echo "$load socket 2 ranks: $(socket_lat 2)"
  echo "$load socket 3 ranks: $(socket_lat 3)"
  echo "$load soak 300 steps (s): $(soak_s) $(soak_s)"
  [ "$load" = busy ] && load_off
done
