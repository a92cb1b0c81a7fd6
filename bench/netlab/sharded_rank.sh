#!/usr/bin/env bash
# One rank of the sharded comparison on the network lab: gradcomm's reducer in
# all-reduce and sharded mode (gradcomm-reducer-bench, a ZeRO-1 step: gradients
# reduce-scattered, parameters all-gathered) and torch's ZeroRedundancyOptimizer
# over DDP (bench/comm/torch_zero_peer.py: gradients all-reduced, partitions
# broadcast) on the same gradient set, one program after the other. Each program's
# bytes on the link come from the rank's interface counters (a line
# "netlab-bytes NAME rank R tx BYTES").
#   tools/netlab run --ranks N --rate 1gbit -- bench/netlab/sharded_rank.sh BENCH PYTHON [SET] [ITERS]
# BENCH: a built gradcomm-reducer-bench; PYTHON: one with torch.
set -euo pipefail
bench=${1:?usage: sharded_rank.sh BENCH PYTHON [SET] [ITERS]}
py=${2:?usage: sharded_rank.sh BENCH PYTHON [SET] [ITERS]}
set_name=${3:-resnet50}
iters=${4:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
: "${NETLAB_IFNAME:?run under tools/netlab}"
tx() { cat "/sys/class/net/$NETLAB_IFNAME/statistics/tx_bytes"; }
measure() {
  local name=$1 before after
  shift
  before=$(tx)
  "$@"
  after=$(tx)
  echo "netlab-bytes $name rank $RANK tx $((after - before))"
}
measure gradcomm_allreduce "$bench" --set "$set_name" --mode allreduce --iters "$iters" --warmup 2
measure gradcomm_sharded "$bench" --set "$set_name" --mode sharded --iters "$iters" --warmup 2
measure torch_zero "$py" "$root/bench/comm/torch_zero_peer.py" --sets "$set_name" --iters "$iters" --warmup 2
