#!/usr/bin/env bash
# Usage: check_mpi_bootstrap.sh MPI_INIT_PROGRAM PERF — the MPI bootstrap under a
# real mpirun: gcommCommInitMpi on two sub-communicators (4 processes), and
# gradcomm-perf meeting through MPI (GRADCOMM_BOOTSTRAP=mpi) with no MASTER_ADDR;
# without the plugin the request fails naming where it looked.
set -euo pipefail
prog=$1 perf=$2
mpi=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
clean=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u GRADCOMM_MASTER_PORT
       GRADCOMM_TIMEOUT_S=60)
out=$("${clean[@]}" "${mpi[@]}" -np 4 timeout 120 "$prog" 2>&1) || { echo "$out"; echo "gcommCommInitMpi failed"; exit 1; }
[ "$(grep -c "mpi init ok" <<< "$out")" -eq 4 ] || { echo "$out"; echo "not every rank finished"; exit 1; }
echo "gcommCommInitMpi on two sub-communicators: ok"

out=$("${clean[@]}" GRADCOMM_BOOTSTRAP=mpi GRADCOMM_DEBUG=INFO "${mpi[@]}" -np 3 timeout 120 "$perf" -b 8 -e 64K -f 8 \
      -n 2 -w 1 2>&1) || { echo "$out"; echo "gradcomm-perf over the MPI bootstrap failed"; exit 1; }
grep -q "Transport: shm (3 ranks, one per process)" <<< "$out" || { echo "$out"; echo "not 3 ranks"; exit 1; }
grep -q "Out of bounds values : 0 OK" <<< "$out" || { echo "$out"; echo "wrong values"; exit 1; }
[ "$(grep -c "MPI bootstrap: rank" <<< "$out")" -eq 3 ] || { echo "$out"; echo "not met through MPI"; exit 1; }
echo "gradcomm-perf, GRADCOMM_BOOTSTRAP=mpi: ok"

if out=$("${clean[@]}" GRADCOMM_BOOTSTRAP=mpi GRADCOMM_MPI_PLUGIN=/nonexistent/libgradcomm_mpi.so.0 \
         "${mpi[@]}" -np 2 timeout 60 "$perf" -b 8 -e 8 2>&1); then
  echo "$out"; echo "ran without the plugin"; exit 1
fi
grep -q "MPI plugin (libgradcomm_mpi.so.0" <<< "$out" || { echo "$out"; echo "no reason given"; exit 1; }
echo "without the plugin: refused with the reason"

# Issue 44 #3: MPI asked for in processes that mpirun did not start (torchrun's two
# workers, say): each would be an MPI world of one, reducing nothing and exiting 0.
# Both are refused, naming the launcher's world and MPI's. Through the MPI
# transport and through the MPI bootstrap alike.
as_root=(); [[ $(id -u) == 0 ]] && as_root=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for how in GRADCOMM_TRANSPORT=mpi GRADCOMM_BOOTSTRAP=mpi; do
  pids=() outs=()
  for r in 0 1; do
    outs+=("$(mktemp)")
    "${clean[@]}" "${as_root[@]}" "$how" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r TORCHELASTIC_RUN_ID=issue44 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 120 "$perf" -b 8 -e 8 -n 1 -w 0 > "${outs[$r]}" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do
    if wait "${pids[$r]}"; then cat "${outs[$r]}"; echo "$how without mpirun: rank $r ran as a world of one"; exit 1; fi
    grep -q "torchrun started this process as rank $r of 2, but MPI's world has 1 rank" "${outs[$r]}" ||
      { cat "${outs[$r]}"; echo "$how without mpirun: no reason given"; exit 1; }
  done
  rm -f "${outs[@]}"
  echo "$how under torchrun's variables, no mpirun: refused on both ranks"
done
