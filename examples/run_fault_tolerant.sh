#!/usr/bin/env bash
# Usage: run_fault_tolerant.sh N GRADCOMM_STORE PROGRAM [ARGS...]
#
# The launch recipe of docs/fault-tolerance.md, on one machine: gradcomm-store
# first (its own process, so that it outlives every rank), then N members, each
# under its own restart loop, so that a crash restarts only the member that
# crashed (what `torchrun --nproc-per-node 1 --max-restarts K`, a Slurm step with
# --requeue or a Kubernetes restartPolicy: OnFailure do per process). A member is
# restarted when a signal ended it (exit status > 128), at most
# FT_MAX_RESTARTS times (default 3); an error exit is final. With FT_TORCHRUN=PYTHON
# (a Python with PyTorch) each slot is one `torchrun --standalone --nproc-per-node 1
# --max-restarts FT_MAX_RESTARTS`, whose agent restarts its one worker instead
# (the member prints "restart N by torchrun's agent"). Prints each slot's
# output, then a verdict: every slot ended with the final line of
# examples/ft_train.c and every member holds the same parameters.
set -euo pipefail
n=$1 store=$2; shift 2
dir=$(mktemp -d)
trap 'kill "$store_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$store" --port 0 --port-file "$dir/port" --quiet > "$dir/store.log" 2>&1 &
store_pid=$!
for _ in $(seq 100); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
export GRADCOMM_STORE="127.0.0.1:$(cat "$dir/port")"

run_slot() {  # slot index: the member under its restart loop
  local slot=$1 restarts=0 status
  shift
  if [[ -n "${FT_TORCHRUN:-}" ]]; then
    timeout "${FT_TIMEOUT:-120}" "$FT_TORCHRUN" -m torch.distributed.run --standalone --nproc-per-node 1 \
      --max-restarts "${FT_MAX_RESTARTS:-3}" --no-python "$@" >> "$dir/out$slot" 2>&1
    return
  fi
  while :; do
    status=0
    timeout "${FT_TIMEOUT:-120}" "$@" >> "$dir/out$slot" 2>&1 || status=$?
    if ((status > 128 && status != 124 && restarts < ${FT_MAX_RESTARTS:-3})); then
      restarts=$((restarts + 1))
      echo "slot $slot: the member ended by signal $((status - 128)); restart $restarts" >> "$dir/out$slot"
      continue
    fi
    return "$status"
  done
}

pids=()
for ((s = 0; s < n; s++)); do
  run_slot "$s" "$@" &
  pids+=($!)
done
status=0
for ((s = 0; s < n; s++)); do
  if ! wait "${pids[$s]}"; then status=1; echo "slot $s failed"; fi
  cat "$dir/out$s"
done
hashes=$(grep -ho 'params [0-9a-f]*' "$dir"/out* | sort -u | wc -l)
finished=$(grep -l 'committed .* steps, loss' "$dir"/out* | wc -l)
restarted=$(grep -h 'restart [0-9]' "$dir"/out* | wc -l)
echo "fault-tolerant run: $n slots, $finished finished, $restarted restart(s), $hashes distinct parameter hash(es)"
if ((status == 0 && finished == n && hashes == 1)); then echo "verdict: ok"; else echo "verdict: FAIL"; exit 1; fi
