#!/usr/bin/env bash
# Usage: check_perf_rows_stream.sh PERF — gradcomm-perf writes each row to its standard
# output, flushed, as soon as that size completes, as nccl-tests does (issue 18: the table
# used to be printed after the whole sweep, so a failing size lost every row before it).
# With -N 0 the run never ends, so a table held back to the end never arrives; rows held
# in stdio's 4 KiB pipe buffer would wait for ~30 rows (15 s and more here). The first
# row of this slow size (~0.5 s on the 2-core machine) must arrive within 10 s while the
# process is still running. Labelled "tools" only: not run under ThreadSanitizer, whose
# slowdown of the 64 MiB reductions would eat the margin.
set -uo pipefail
perf=$1
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2> /dev/null; rm -rf "$dir"' EXIT
mkfifo "$dir/rows"
env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$perf" --local 2 -w 0 -n 10 -b 64M -e 64M -N 0 \
  -c 0 > "$dir/rows" 2>&1 &
pid=$!
first="" seen=""
while IFS= read -r -t 10 line; do
  seen+="$line"$'\n'
  [[ $line =~ ^\ +[0-9]+\ +[0-9]+\  ]] && { first=$line; break; }
done < "$dir/rows"
kill -0 "$pid" 2> /dev/null; alive=$?
kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; pid=
[ -n "$first" ] || { echo "$seen"; echo "FAIL: no row within 10 s of a 64 MiB size run with -N 0: rows are not written as they complete"; exit 1; }
[ $alive -eq 0 ] || { echo "$seen"; echo "FAIL: gradcomm-perf -N 0 had exited when its first row arrived"; exit 1; }
echo "first row while running: $first"
echo "gradcomm-perf rows stream: ok"
