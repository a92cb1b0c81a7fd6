#!/usr/bin/env bash
# shm and socket on loopback (no shaping): current pieces against small slices
cd /work/main
for round in 1 2 3; do
  for t in shm socket; do
    for n in 2 4; do
      small=$((32 * n))
      for v in 8192/2 $small/2; do
        echo "== round $round $t n=$n $v"
        GRADCOMM_TRANSPORT=$t EXP_PIECE_KB=${v%/*} EXP_AHEAD=${v#*/} examples/run_processes.sh $n \
          /tmp/variant/build/tools/perf/gradcomm-perf -b 1M -e 64M -f 4 -n 5 -w 2 | grep -E "^\s+[0-9]" | head -4
      done
    done
  done
done
