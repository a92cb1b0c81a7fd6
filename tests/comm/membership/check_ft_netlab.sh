#!/usr/bin/env bash
# Fault-tolerant members across network namespaces (tools/netlab, 1 Gbit links):
# gradcomm-store runs in rank 0's namespace, the member that is rank 0 of the
# first generation is killed at step 20 and restarted, so later generations'
# rank 0 lives in another namespace than the store. Every slot must finish with
# one parameter hash. Exit 77 (skipped, with the reason) where namespaces cannot
# be made. Usage: check_ft_netlab.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
if [[ $(id -u) != 0 ]]; then echo "skipped: needs root (network namespaces)"; exit 77; fi
if ! ip netns add gcftcheck$$ 2>/dev/null; then echo "skipped: cannot create a network namespace here"; exit 77; fi
ip netns del gcftcheck$$
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python3 "$src/tools/netlab" run --ranks 3 --rate 1gbit --name gcftnl --no-probe --timeout 150 --logdir "$out/lab" \
  --env "CHAOS_DIR=$out" -- bash "$src/bench/netlab/chaos_slot.sh" "$build" $(( $(date +%s) + 120 )) \
  --min-ranks 3 --steps 80 --step-ms 5 --timeout 5 --transport socket --die 20:0 --check 10
status=$?
cat "$out"/lab/rank*.log
finished=$(grep -l 'committed 80 steps' "$out"/lab/rank*.log | wc -l)
hashes=$(grep -ho 'params [0-9a-f]*' "$out"/lab/rank*.log | sort -u | wc -l)
restarts=$(grep -h 'run 2 starts' "$out"/lab/rank*.log | wc -l)
echo "netlab fault tolerance: lab exit $status, $finished of 3 slots finished, $restarts restart(s), $hashes parameter hash(es)"
[[ $status == 0 && $finished == 3 && $hashes == 1 && $restarts -ge 1 ]] && echo "verdict: ok" || { echo "verdict: FAIL"; exit 1; }
