#!/usr/bin/env bash
# Usage: check_perf.sh PERF NRANKS JSON — short host sweeps with validation: every
# collective, #wrong must be 0, the table and the JSON must be well formed.
set -euo pipefail
perf=$1 n=$2 json=$3
here=$(dirname "$0")
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  for d in float half bfloat16; do
    rm -f "$json"
    out=$("$perf" --local "$n" --collective "$c" -d "$d" -b 8 -e 64K -f 4 -n 3 -w 1 -c 1 -J "$json")
    # Here-strings, not `echo | grep -q`: under pipefail, grep -q leaving early
    # kills echo with SIGPIPE and fails the pipeline although the line matched.
    grep -q "Avg bus bandwidth" <<< "$out" || { echo "$out"; echo "no Avg bus bandwidth line"; exit 1; }
    grep -q "Out of bounds values : 0 OK" <<< "$out" || { echo "$out"; echo "wrong values"; exit 1; }
    python3 "$here/check_perf_json.py" "$json" "$n" 7 > /dev/null
  done
done
# Blocking mode (-z 1) is reported in the header and the JSON.
rm -f "$json"
out=$("$perf" --local "$n" -b 8 -e 1K -f 4 -n 2 -w 1 -z 1 -J "$json")
grep -q "Blocking Enabled: wait and barrier after each inner iteration" <<< "$out" || { echo "$out"; echo "-z 1 not in the header"; exit 1; }
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['config']['blocking_collectives'] == 'true' and d['gradcomm']['blocking'] == 1, d" "$json"
# -a: the reported time is rank 0's, the mean, the min or the max of the ranks' times.
for a in 0 1 2 3; do
  rm -f "$json"
  "$perf" --local "$n" -b 8 -e 4K -f 8 -n 2 -w 1 -a "$a" -J "$json" > /dev/null
  python3 "$here/check_perf_times.py" "$json" "$n"
done
"$perf" --local "$n" -a 4 > /dev/null 2>&1 && { echo "-a 4 accepted"; exit 1; }
echo "perf sweep on $n local ranks: ok"
