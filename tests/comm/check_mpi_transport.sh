#!/usr/bin/env bash
# Usage: check_mpi_transport.sh MPI_TRANSPORT_PROGRAM — the MPI transport under a
# real mpirun with 2, 3 and 4 processes: the same bits as the local transport for
# every collective and send/receive, and its failures (a mismatch, a rank that
# skips a collective) end every rank with a reason instead of a hang.
set -euo pipefail
prog=$1
mpi=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
clean=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u GRADCOMM_MASTER_PORT)
for n in 2 3 4; do
  out=$("${clean[@]}" "${mpi[@]}" -np $n timeout 240 "$prog" 2>&1) || { echo "$out"; echo "-np $n failed"; exit 1; }
  [ "$(grep -c "mpi transport ok" <<< "$out")" -eq $n ] || { echo "$out"; echo "-np $n: not every rank finished"; exit 1; }
  grep -m1 "mpi transport ok" <<< "$out"
done
echo "the MPI transport under mpirun -np 2, 3, 4: ok"
