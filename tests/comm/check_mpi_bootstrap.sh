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
