#!/usr/bin/env bash
# Usage: check_perf_slurm.sh PERF RANK_PROGRAM — gradcomm under a real Slurm: the
# test starts a private single-node cluster (munged, slurmctld, slurmd, all in a
# temporary folder, on free ports) and runs
#   srun -n 2 / -n 3 gradcomm-perf with no MASTER_ADDR (the rendezvous from Slurm's
#   own variables), a stale RANK=0 WORLD_SIZE=1 under srun -n 2 (refused at once),
#   sbatch -n 2 --wrap 'gradcomm-perf' (a single-process run, as nccl-tests), and
#   sbatch -n 2 --wrap '<a program that asks for its rank>' (refused at once).
# (--overcommit: 3 tasks on a 2-core node.) Needs Slurm and munge (tools/install_deps.sh installs slurm-wlm) and root (the
# daemons run as this user). Where the cluster cannot start within a minute it is
# skipped with the reason (exit 77), as the issue asks: the same rules are also
# tested with Slurm's documented variables (check_perf_launchers.sh), which always run.
set -uo pipefail
perf=$1 rank_program=$2
skip() {
  echo "skipped: $*"
  exit 77
}
for tool in munged slurmctld slurmd srun sbatch squeue; do
  command -v "$tool" > /dev/null || skip "no $tool (apt-get install slurm-wlm)"
done
[[ $(id -u) == 0 ]] || skip "the private cluster's daemons run as root here"
dir=$(mktemp -d /tmp/gradcomm-slurm.XXXXXX)
chmod 755 "$dir"
cleanup() {
  for pid in "$dir"/*.pid; do [ -f "$pid" ] && kill "$(cat "$pid")" 2> /dev/null; done
  sleep 1
  rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)

# munge, private: its own key, socket and files.
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
head -c 1024 /dev/urandom > "$dir/munge/key" && chmod 400 "$dir/munge/key"
chmod 700 "$dir/munge"
munged --force --socket="$dir/munge/socket" --key-file="$dir/munge/key" --pid-file="$dir/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed" 2> "$dir/log/munged.err" ||
  skip "munged did not start: $(cat "$dir/log/munged.err")"

cat > "$dir/slurm.conf" << CONF
ClusterName=gradcomm-test
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmUser=root
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=gradcomm Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" 2> "$dir/log/slurmctld.err" || skip "slurmctld did not start: $(cat "$dir/log/slurmctld.err")"
slurmd -f "$SLURM_CONF" 2> "$dir/log/slurmd.err" || skip "slurmd did not start: $(cat "$dir/log/slurmd.err")"
for ((i = 0; i < 60; i++)); do
  sinfo -h -o %T 2> /dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %T 2> /dev/null | grep -q idle ||
  skip "the node did not become idle within 60 s: $(tail -3 "$dir/log/slurmctld.log" "$dir/log/slurmd.log")"
echo "private Slurm $(sinfo -V) on $host"

fail() { echo "FAIL: $*"; exit 1; }
clean=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u GRADCOMM_MASTER_PORT
       -u TORCHELASTIC_RUN_ID GRADCOMM_TIMEOUT_S=60)
for n in 2 3; do
  out=$("${clean[@]}" timeout 120 srun --overcommit -n $n "$perf" -b 8 -e 64K -f 8 -n 2 -w 1 2>&1) || fail "srun -n $n: $out"
  grep -q "Transport: shm ($n ranks, one per process)" <<< "$out" || fail "srun -n $n: not $n ranks: $out"
  grep -q "Out of bounds values : 0 OK" <<< "$out" || fail "srun -n $n: wrong values: $out"
done
echo "srun -n 2 and -n 3 gradcomm-perf, no MASTER_ADDR: ok"

start=$SECONDS
if out=$("${clean[@]}" RANK=0 WORLD_SIZE=1 timeout 120 srun -n 2 "$perf" -b 8 -e 8 2>&1); then
  fail "a stale RANK=0 WORLD_SIZE=1 under srun -n 2 was accepted: $out"
fi
grep -q "disagree with SLURM_PROCID=1 SLURM_NTASKS=2 set by Slurm" <<< "$out" || fail "no reason: $out"
(( SECONDS - start < 30 )) || fail "the refusal took $((SECONDS - start)) s"
echo "a stale WORLD_SIZE under srun: refused at once"

batch() {  # NAME COMMAND: sbatch -n 2 --wrap COMMAND, waits, prints its output
  local id
  id=$(sbatch --parsable -n 2 -o "$dir/$1.out" --wrap "$2") || fail "sbatch $1"
  for ((i = 0; i < 120; i++)); do
    squeue -h -j "$id" 2> /dev/null | grep -q . || break
    sleep 1
  done
  cat "$dir/$1.out"
}
out=$(batch perf "${clean[*]} $perf -b 8 -e 8 -n 1 -w 0")
grep -q "Transport: local" <<< "$out" && grep -q "Out of bounds values : 0 OK" <<< "$out" ||
  fail "sbatch --wrap gradcomm-perf was not a single-process run: $out"
out=$(batch rank "${clean[*]} $rank_program socket")
grep -q "not started by srun" <<< "$out" || fail "sbatch --wrap <a rank> was not refused: $out"
echo "sbatch without srun: gradcomm-perf runs as one process; a rank is refused at once"
echo "real Slurm: ok"
