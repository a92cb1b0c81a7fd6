#!/usr/bin/env bash
# Usage: check_perf_launchers.sh PERF MLP_EXAMPLE — gradcomm-perf and the MLP example
# started by mpirun (Open MPI) and by srun (Slurm's variables, set as srun sets them),
# with no MASTER_ADDR / MASTER_PORT: the launchers imply the rendezvous (issue 18).
# A stale RANK / WORLD_SIZE loses to the launcher with a warning; sbatch without srun
# is refused at once. Under mpirun also the MPI transport (GRADCOMM_TRANSPORT=mpi).
# mpirun is required under CI=true (tools/install_deps.sh installs openmpi-bin),
# else its part is skipped with the reason.
set -euo pipefail
perf=$1 mlp=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
clean=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u GRADCOMM_MASTER_PORT
       -u TORCHELASTIC_RUN_ID GRADCOMM_TIMEOUT_S=60)

expect_sweep() {  # FILE NRANKS
  # One host: gcommTransportAuto's choice is the shm transport.
  grep -q "Transport: shm ($2 ranks, one per process)" "$1" || { cat "$1"; echo "not $2 shm ranks"; exit 1; }
  grep -q "Out of bounds values : 0 OK" "$1" || { cat "$1"; echo "wrong values"; exit 1; }
}

# --- srun: Slurm's variables as srun sets them in a one-node step ---------------
srun_like() {  # NTASKS JOB_ID CMD... (extra variables through the environment)
  local n=$1 job=$2; shift 2
  local pids=() r
  for ((r = 0; r < n; r++)); do
    "${clean[@]}" SLURM_PROCID=$r SLURM_NTASKS=$n SLURM_LOCALID=$r SLURM_JOB_ID=$job SLURM_STEP_ID=0 \
      SLURM_STEP_NUM_NODES=1 SLURM_STEP_NODELIST="$(hostname)" timeout 120 "$@" > "$dir/srun$r" 2>&1 &
    pids+=($!)
  done
  local status=0
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || status=1
  done
  return $status
}
job=$((RANDOM * 7 + $$))
srun_like 3 "$job" "$perf" -b 8 -e 64K -f 8 -n 2 -w 1 || { cat "$dir"/srun*; echo "srun-like run failed"; exit 1; }
expect_sweep "$dir/srun0" 3
# RANK=0 WORLD_SIZE=1 left in the environment used to make two separate one-rank
# jobs that both exited 0: now every rank refuses at once, naming both.
start=$SECONDS
if RANK=0 WORLD_SIZE=1 srun_like 2 "$((job + 1))" env RANK=0 WORLD_SIZE=1 "$perf" -b 8 -e 1K -n 1 -w 0 2> /dev/null; then
  cat "$dir/srun0"; echo "a stale WORLD_SIZE=1 under srun -n 2 was accepted"; exit 1
fi
for r in 0 1; do
  grep -q "RANK=0 WORLD_SIZE=1 (no TORCHELASTIC_RUN_ID, so not torchrun's) disagree with SLURM_PROCID=$r SLURM_NTASKS=2"     "$dir/srun$r" || { cat "$dir/srun$r"; echo "rank $r did not name both"; exit 1; }
done
(( SECONDS - start < 20 )) || { echo "the refusal took $((SECONDS - start)) s"; exit 1; }
echo "srun-like launch: ok"

# sbatch -n 2 running the program itself (no srun): one process, so gradcomm-perf
# runs as a single process, as nccl-tests does (gcommCommInitFromEnv asked for a
# rank there is refused at once: LaunchEnv.SbatchWithoutSrunIsRefusedAtOnce).
out=$("${clean[@]}" SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_JOB_ID=$job timeout 60 "$perf" -b 8 -e 8 \
      -n 1 -w 0 2>&1) || { echo "$out"; echo "gradcomm-perf in an sbatch script failed"; exit 1; }
grep -q "Transport: local" <<< "$out" || { echo "$out"; echo "not a single-process run"; exit 1; }
echo "sbatch without srun: a single-process run"

# --- mpirun ------------------------------------------------------------------------
if ! command -v mpirun > /dev/null; then
  [[ ${CI:-} == true ]] && { echo "mpirun is missing under CI (tools/install_deps.sh installs openmpi-bin)"; exit 1; }
  echo "skipped the mpirun part: no mpirun on this machine (apt-get install openmpi-bin)"
  exit 0
fi
mpi=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
for n in 2 3; do
  "${clean[@]}" "${mpi[@]}" -np $n timeout 120 "$perf" -b 8 -e 256K -f 8 -n 2 -w 1 > "$dir/mpi$n" 2>&1 ||
    { cat "$dir/mpi$n"; echo "mpirun -np $n gradcomm-perf failed"; exit 1; }
  expect_sweep "$dir/mpi$n" $n
done
# A stale RANK=0 WORLD_SIZE=2 gave both processes rank 0.
"${clean[@]}" RANK=0 WORLD_SIZE=2 "${mpi[@]}" -np 2 -x RANK -x WORLD_SIZE timeout 120 "$perf" -b 8 -e 1K -n 1 -w 1 \
  > "$dir/stale" 2>&1 || { cat "$dir/stale"; echo "mpirun with a stale RANK failed"; exit 1; }
expect_sweep "$dir/stale" 2
grep -q "using Open MPI's" "$dir/stale" || { cat "$dir/stale"; echo "no warning about the stale RANK"; exit 1; }
for n in 2 3; do
  "${clean[@]}" "${mpi[@]}" -np $n timeout 120 "$mlp" --steps 100 > "$dir/mlp" 2>&1 ||
    { cat "$dir/mlp"; echo "mpirun -np $n MLP example failed"; exit 1; }
  grep -q "$n ranks (processes)" "$dir/mlp" && grep -q "limit [^)]*: ok" "$dir/mlp" ||
    { cat "$dir/mlp"; echo "the MLP example did not train as $n processes"; exit 1; }
done
echo "mpirun launch: ok"

# The MPI transport (GRADCOMM_TRANSPORT=mpi): MPI is the wire, no store is met.
for n in 2 3; do
  for c in all_reduce reduce_scatter alltoall sendrecv; do
    "${clean[@]}" GRADCOMM_TRANSPORT=mpi "${mpi[@]}" -np $n -x GRADCOMM_TRANSPORT timeout 120 "$perf" --collective $c \
      -b 8 -e 4M -f 32 -n 2 -w 1 -c 1 > "$dir/mpi_t$n" 2>&1 ||
      { cat "$dir/mpi_t$n"; echo "GRADCOMM_TRANSPORT=mpi mpirun -np $n gradcomm-perf --collective $c failed"; exit 1; }
    grep -q "Transport: mpi ($n ranks, one per process)" "$dir/mpi_t$n" || { cat "$dir/mpi_t$n"; echo "not the MPI transport"; exit 1; }
    grep -q "Out of bounds values : 0 OK" "$dir/mpi_t$n" || { cat "$dir/mpi_t$n"; echo "wrong values"; exit 1; }
  done
done
for n in 2 3; do
  "${clean[@]}" GRADCOMM_TRANSPORT=mpi GRADCOMM_DEBUG=INFO "${mpi[@]}" -np $n -x GRADCOMM_TRANSPORT -x GRADCOMM_DEBUG \
    timeout 120 "$mlp" --steps 100 > "$dir/mlp_mpi" 2>&1 ||
    { cat "$dir/mlp_mpi"; echo "the MLP example on the MPI transport (-np $n) failed"; exit 1; }
  [ "$(grep -c "MPI transport: rank" "$dir/mlp_mpi")" -eq $n ] || { cat "$dir/mlp_mpi"; echo "not $n MPI-transport ranks"; exit 1; }
  grep -q "limit [^)]*: ok" "$dir/mlp_mpi" || { cat "$dir/mlp_mpi"; echo "the MLP example did not train on MPI (-np $n)"; exit 1; }
done
echo "mpirun with the MPI transport: ok"
