#!/usr/bin/env bash
# Sharded vs all-reduce mode on the socket transport (one process per rank), and
# PyTorch's ZeroRedundancyOptimizer (gloo, CPU) as the peer, in one run:
#   bench/comm/sharded_vs_zero.sh OUT_DIR [PYTHON]
# OUT_DIR receives reducer_<set>_w<N>.json (gradcomm-reducer-bench -J, both modes)
# and zero_<set>_w<N>.json (bench/comm/torch_zero_peer.py). GPT-2 medium runs at 2
# ranks only (gradcomm: ~7 GB a process; PyTorch: ~5 GB). Needs a build in build/.
set -euo pipefail
out=${1:?usage: sharded_vs_zero.sh OUT_DIR [PYTHON]}
py=${2:-python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
bench=$root/build/bench/comm/gradcomm-reducer-bench
mkdir -p "$out"
run() {  # set world iters
  local set=$1 world=$2 iters=$3
  for mode in allreduce sharded; do
    RUN_PROCESSES_TIMEOUT=900 bash "$root/examples/run_processes.sh" "$world" "$bench" --set "$set" --mode "$mode" \
      --iters "$iters" --warmup 2 -J "$out/reducer_${set}_w${world}_${mode}.json" | tee -a "$out/reducer.log"
  done
  "$py" "$root/bench/comm/torch_zero_peer.py" --world "$world" --sets "$set" --iters "$iters" --warmup 2 \
    | tee "$out/zero_${set}_w${world}.json"
}
run resnet50 2 10
run resnet50 4 10
run gpt2_medium 2 5
