#!/usr/bin/env bash
# The host transports side by side on this machine: gradcomm-perf's all-reduce
# over the shm and socket transports and torch's gloo (torch_gloo_peer.py), one
# process per rank, 8 B to 128 MiB (300 calls a size up to 512 KiB, 20 above),
# for 2 and 4 ranks, in rotating blocks (ROUNDS, default 2). Raw files into
# OUT_DIR; the table:
#   bench/comm/compare_host_transports.py OUT_DIR
# Usage: bench/comm/host_transports.sh BUILD_DIR PYTHON OUT_DIR
set -euo pipefail
build=${1:?usage: host_transports.sh BUILD_DIR PYTHON OUT_DIR}
py=${2:?python with torch}
out=${3:?out dir}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out"
perf=$build/tools/perf/gradcomm-perf
for n in ${RANKS:-2 4}; do
  for round in $(seq "${ROUNDS:-2}"); do
    for variant in shm socket gloo; do
      echo "== $n ranks, round $round: $variant" >&2
      # Small sizes with many calls (one slow wake-up on this noisy VM would move a
      # mean of 30), large ones with few.
      for range in "8 512K 300" "1M 128M 20"; do
        read -r b e iters <<<"$range"
        tag=$n.r$round.$b
        if [ "$variant" = gloo ]; then
          "$root/examples/run_processes.sh" "$n" "$py" "$here/torch_gloo_peer.py" -b "$(numfmt --from=iec "$b")" \
            -e "$(numfmt --from=iec "$e")" -n "$iters" -w 5 > "$out/torch-gloo-$tag.jsonl"
        else
          GRADCOMM_TRANSPORT=$variant "$root/examples/run_processes.sh" "$n" "$perf" -b "$b" -e "$e" -f 2 \
            -n "$iters" -w 5 -J "$out/gradcomm-perf-$variant-$tag.json" > "$out/gradcomm-perf-$variant-$tag.txt"
        fi
      done
    done
  done
done
