#!/usr/bin/env bash
# Usage: check_perf_processes.sh PERF NRANKS [TRANSPORT] — gradcomm-perf as NRANKS
# processes under torchrun's variables (one rank each) on a host transport
# (GRADCOMM_TRANSPORT=TRANSPORT: socket, the default, or shm):
# every process exits 0, rank 0 alone prints the table, every size validated (all-reduce
# and sendrecv), and
# a bad collective on one rank fails every rank with a message instead of a hang.
set -euo pipefail
perf=$1 n=$2 transport=${3:-socket}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
launch() {  # launch EXTRA_ARGS_OF_RANK_1 -- ARGS
  local extra=$1; shift
  local pids=()
  for ((r = 0; r < n; r++)); do
    args=("$@")
    [[ $r == 1 && -n $extra ]] && args+=($extra)
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GRADCOMM_TIMEOUT_S=60 \
      GRADCOMM_TRANSPORT=$transport \
      timeout 120 "$perf" "${args[@]}" > "$dir/out$r" 2>&1 &
    pids+=($!)
  done
  codes=()
  for p in "${pids[@]}"; do
    set +e; wait "$p"; codes+=($?); set -e
  done
}

launch "" --collective all_reduce -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 -J "$dir/perf.json"
for ((r = 0; r < n; r++)); do
  [[ ${codes[$r]} == 0 ]] || { cat "$dir/out$r"; echo "rank $r exited ${codes[$r]}"; exit 1; }
done
grep -q "Transport: $transport ($n ranks, one per process)" "$dir/out0" || { cat "$dir/out0"; echo "no $transport transport line"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$dir/out0" || { cat "$dir/out0"; echo "wrong values"; exit 1; }
[[ $(grep -c "Rank .* Group  0 Pid" "$dir/out0") == "$n" ]] || { cat "$dir/out0"; echo "not one line per rank"; exit 1; }
for ((r = 1; r < n; r++)); do
  [[ ! -s $dir/out$r ]] || { cat "$dir/out$r"; echo "rank $r printed"; exit 1; }
done
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['gradcomm']['transport']==sys.argv[3] and d['gradcomm']['nranks']==int(sys.argv[2]), d" "$dir/perf.json" "$n" "$transport"
python3 "$(dirname "$0")/check_perf_json.py" "$dir/perf.json" "$n"
# Every process's times reached rank 0 (the default -a 1: their mean).
python3 "$(dirname "$0")/check_perf_times.py" "$dir/perf.json" "$n"

# Send/receive between processes (a ring in a group), every size validated.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
launch "" --collective sendrecv -b 8 -e 16M -f 16 -n 3 -w 1 -c 2
for ((r = 0; r < n; r++)); do
  [[ ${codes[$r]} == 0 ]] || { cat "$dir/out$r"; echo "sendrecv: rank $r exited ${codes[$r]}"; exit 1; }
done
grep -q "Out of bounds values : 0 OK" "$dir/out0" || { cat "$dir/out0"; echo "sendrecv: wrong values"; exit 1; }

# Rank 1 asks for another maximum size: the ranks disagree on a collective.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
launch "-e 8K" --collective all_reduce -b 4K -e 4M -f 4 -n 2 -w 1
for ((r = 0; r < n; r++)); do
  [[ ${codes[$r]} != 0 && ${codes[$r]} != 124 ]] || { cat "$dir/out$r"; echo "rank $r: exit ${codes[$r]}"; exit 1; }
  grep -q "gradcomm-perf: rank $r: rank 1 was given other options than rank 0" "$dir/out$r" ||
    { cat "$dir/out$r"; echo "rank $r: no error line naming rank 1"; exit 1; }
  ! grep -qE '^ +[0-9]+ +[0-9]+ ' "$dir/out$r" || { cat "$dir/out$r"; echo "rank $r: rows before the refusal"; exit 1; }
done
echo "gradcomm-perf as $n processes on the $transport transport: ok"
