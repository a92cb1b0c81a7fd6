#!/usr/bin/env bash
# The straggler lab (issue 47): 4 ranks on 1 Gbit links; for each model, one rank
# 200 ms late in its backward, its data loading and its optimizer step, one rank
# on a slower link (and an MLP with BatchNorm, whose buffer broadcast before forward
# is a meeting of the ranks, late in data and optimizer), and nobody late for
# STRAGGLER_CLEAN_STEPS steps (false
# alarms); then attribution's cost, on and off in rotating blocks. Each run's
# rankR.json goes to OUT/<model>-<scenario>/; bench/netlab/straggler_report.py
# summarizes them. A benchmark run by hand (tens of minutes), not a CI stage.
#   bench/netlab/stragglers.sh OUT [mlp transformer]
set -euo pipefail
out=${1:?usage: stragglers.sh OUT [MODEL...]}
shift
[ $# -gt 0 ] && models=("$@") || models=(mlp transformer)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=${PYTHON:-python3}
steps=${STRAGGLER_STEPS:-41}
clean=${STRAGGLER_CLEAN_STEPS:-1000}
slow_rate=${STRAGGLER_SLOW_RATE:-250mbit}
lab() {  # lab NAME [netlab options] -- program options
  local name=$1
  shift
  local netlab_opts=()
  while [ "$1" != "--" ]; do netlab_opts+=("$1"); shift; done
  shift
  mkdir -p "$out/$name"
  "$root/tools/netlab" run --ranks 4 --rate 1gbit --no-probe --timeout 3000 --logdir "$out/$name" "${netlab_opts[@]}" -- \
    "$py" "$here/straggler_lab.py" --out "$out/$name" "$@"
}
for m in "${models[@]}"; do
  lab "$m-backward" -- --model "$m" --steps "$steps" --late-rank 2 --late-phase backward
  lab "$m-data" -- --model "$m" --steps "$steps" --late-rank 1 --late-phase data
  lab "$m-optimizer" -- --model "$m" --steps "$steps" --late-rank 3 --late-phase optimizer
  lab "$m-link" --slow "2=$slow_rate" -- --model "$m" --steps "$steps" --late-rank 2 --late-phase none
done
# BatchNorm: the buffers' broadcast before forward makes every rank wait for a late batch there.
lab "bn_mlp-data" -- --model bn_mlp --steps "$steps" --late-rank 1 --late-phase data
lab "bn_mlp-optimizer" -- --model bn_mlp --steps "$steps" --late-rank 3 --late-phase optimizer
lab "transformer-clean" -- --model transformer --steps "$clean"
lab "transformer-overhead" -- --model transformer --overhead 10 --steps "${STRAGGLER_OVERHEAD_BLOCKS:-20}"
"$py" "$here/straggler_report.py" "$out"
