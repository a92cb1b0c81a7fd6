#!/usr/bin/env bash
# The wire comparison on the network lab: every variant of wire_train.py (gradcomm's
# wires and PyTorch's DDP, fp16 and PowerSGD hooks) on shaped links, one lab per
# (model, rate, rank count), then report.py's tables and plots.
#   bench/netlab/compare.sh OUT_DIR [PYTHON]
# Knobs (environment): RATES (default "1gbit 10gbit"), RANKS ("2 4"), MODELS
# ("mlp conv"), ROUNDS (6), STEPS (10), VARIANTS (all), SYNC_EVERY (the gc_diloco
# variants' H, 10), FRAGMENTS and OVERLAP (the gc_sdiloco variants' fragments, 4, and
# overlap_steps, SYNC_EVERY / FRAGMENTS). Needs root (tools/netlab),
# and a Python with torch and gradcomm (pip install ./python). Run on an idle machine:
# the ranks share its cores.
set -euo pipefail
out=${1:?usage: compare.sh OUT_DIR [PYTHON]}
py=${2:-python3}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
extra=()
[ -n "${VARIANTS:-}" ] && extra+=(--variants "$VARIANTS")
[ -n "${SYNC_EVERY:-}" ] && extra+=(--sync-every "$SYNC_EVERY")
[ -n "${FRAGMENTS:-}" ] && extra+=(--fragments "$FRAGMENTS")
[ -n "${OVERLAP:-}" ] && extra+=(--overlap "$OVERLAP")
for model in ${MODELS:-mlp conv}; do
  for rate in ${RATES:-1gbit 10gbit}; do
    for ranks in ${RANKS:-2 4}; do
      run="$out/$model-$rate-w$ranks"
      echo "== $model, $rate, $ranks ranks -> $run"
      "$root/tools/netlab" run --ranks "$ranks" --rate "$rate" --logdir "$run" --timeout "${TIMEOUT:-1800}" -- \
        "$py" "$root/bench/netlab/wire_train.py" --model "$model" --rounds "${ROUNDS:-6}" --steps "${STEPS:-10}" \
        --out "$run" "${extra[@]}"
    done
  done
done
"$py" "$root/bench/netlab/report.py" "$out" | tee "$out/summary.md"
