#!/usr/bin/env bash
# One slot of the lab's chaos run (bench/netlab/chaos.py), run by `tools/netlab
# run` in each rank's namespace: slot 0 first starts gradcomm-store (its own
# process: the supervisor never kills it), then every slot runs a member
# (examples/ft_train.c, or the command in CHAOS_MEMBER: chaos.py --member torch
# sets bench/netlab/chaos_member.py) under a restart loop until one run finishes the job
# (exit 0) or the slot's deadline passes. Any other end is restarted: a kill, a
# frozen member refused when it woke (exit 4), a join that failed.
#   chaos_slot.sh BUILD_DIR DEADLINE_UNIX MEMBER_ARGS...
set -u
build=$1 deadline=$2; shift 2
port=29400
if [[ "$RANK" == 0 ]]; then
  "$build/tools/gradcomm-store" --host "$NETLAB_ADDR" --port "$port" > "$CHAOS_DIR/store.log" 2>&1 &
fi
export GRADCOMM_STORE="$MASTER_ADDR:$port"
runs=0
while (( $(date +%s) < deadline )); do
  runs=$((runs + 1))
  echo "slot $RANK: run $runs starts at $(date +%s.%N)"
  status=0
  ${CHAOS_MEMBER:-"$build/examples/gradcomm_example_ft"} --name "slot$RANK-run$runs" "$@" || status=$?
  echo "slot $RANK: run $runs ended with status $status at $(date +%s.%N)"
  [[ $status == 0 ]] && break
  sleep 0.2
done
[[ "$RANK" == 0 ]] && sleep 2 && kill %1 2>/dev/null
exit 0
