#!/usr/bin/env bash
set -u
PY=/root/.cache/gradcomm/venv-torch/bin/python
i=0
for round in $(seq 1 ${ROUNDS:-3}); do
  for v in ${VARS:-8192/2 512/2 256/2 512/4 1024/1 gloo}; do
    i=$((i+1)); export MASTER_PORT=$((29600+i))
    echo "== round $round $v"
    case $v in
      gloo) $PY /work/main/bench/comm/torch_gloo_peer.py -b 4194304 -e ${MAXB:-67108864} -n 3 -w 1 2>/dev/null | grep bytes ;;
      *) EXP_PIECE_KB=${v%/*} EXP_AHEAD=${v#*/} /tmp/variant/build/tools/perf/gradcomm-perf -b 4M -e ${MAXS:-64M} -f 2 -n 3 -w 1 | grep -E "^\s+[0-9]" ;;
    esac
  done
done
