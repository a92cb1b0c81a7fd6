#!/usr/bin/env bash
# Usage: run_processes.sh N PROGRAM [ARGS...] — runs PROGRAM as N processes under
# torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) on a
# free loopback port, as torchrun --no-python would; prints every rank's output and
# exits non-zero if any rank did. Each process is bounded (RUN_PROCESSES_TIMEOUT
# seconds, default 120).
set -euo pipefail
n=$1; shift
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port GRADCOMM_TIMEOUT_S=60 \
    timeout "${RUN_PROCESSES_TIMEOUT:-120}" "$@" > "$dir/out$r" 2>&1 &
  pids+=($!)
done
status=0
for ((r = 0; r < n; r++)); do
  if ! wait "${pids[$r]}"; then status=1; echo "rank $r failed:"; fi
  cat "$dir/out$r"
done
exit $status
