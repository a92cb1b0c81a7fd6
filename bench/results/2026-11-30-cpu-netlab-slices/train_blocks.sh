#!/usr/bin/env bash
# Whole lab runs alternating the library before (8 MiB pieces) and after (32 KiB slices on the socket wire).
set -u
cd /work/main
PY=/root/.cache/gradcomm/venv-torch/bin/python
OUT=${OUT:-/tmp/lab/train}
for rep in ${REPS:-1 2}; do
  for ranks in ${RANKS:-4}; do
    for v in before after; do
      run=$OUT/mlp-1gbit-w$ranks-$v-$rep
      if [ $v = before ]; then export LD_LIBRARY_PATH=/tmp/variant/build; else export LD_LIBRARY_PATH=/work/main/build; fi
      echo "== $run $(date +%T)"
      tools/netlab run --ranks $ranks --rate 1gbit --no-probe --logdir $run --timeout 1200 -- \
        $PY bench/netlab/wire_train.py --model mlp --rounds ${ROUNDS:-4} --steps 10 --out $run \
        --variants ${TRAIN_VARIANTS:-ddp_f32,gc_f32} > $run.out 2>&1
      echo "rc=$?"
    done
  done
done
