#!/usr/bin/env bash
# A real Slurm for one test, on this host: sourced by a test script, which then calls
#   slurm_up DIR        writes DIR/slurm.conf for this host (its CPUs from `slurmd -C`, 4 counted
#                       virtual GPUs whose device files are empty files in DIR/dev, since nothing
#                       reads them), starts munged, slurmctld and slurmd in the foreground as
#                       children of the test, and waits until the node is idle; exports SLURM_CONF
#   slurm_down          stops them (also on exit, through the trap slurm_up sets)
# One node only: Debian's Slurm is built without --enable-multiple-slurmd, so a second slurmd on
# the same host is refused (tests/multinode/slurm_test.sh runs two, one per network-namespace host,
# with the pieces below). Needs root (slurmd starts job steps as their users) and the Debian
# packages slurm-wlm and munge (scripts/setup.sh installs them); without them slurm_up prints
# "skipped: ..." and exits 0, which ctest reports as a skip (SKIP_REGULAR_EXPRESSION).
# Ports are chosen at random in 20000-59999 so that two tests never share a controller.

slurm_pids=()

slurm_down() {
  local p
  for p in "${slurm_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${slurm_pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  slurm_pids=()
}

# Skips the test (see above) unless Slurm, munge and root are there.
slurm_require() {
  for tool in munged slurmctld slurmd sbatch srun scontrol squeue scancel; do
    if ! command -v "$tool" >/dev/null; then
      echo "skipped: $tool is not installed (Debian packages slurm-wlm and munge; scripts/setup.sh installs them)"
      exit 0
    fi
  done
  if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: a test Slurm needs root (slurmd starts jobs as their users)"
    exit 0
  fi
}

# slurm_conf_common DIR CONTROLLER ADDRESS PORT: the lines of slurm.conf every test cluster shares
# (the controller CONTROLLER at ADDRESS, ports PORT and PORT + 1, state, logs and pid files in DIR:
# %n is the node's name, so that several slurmd can share DIR).
slurm_conf_common() {
  local dir=$1 ctl=$2 addr=$3 port=$4
  cat <<CONF
ClusterName=embertest
SlurmctldHost=$ctl($addr)
SlurmUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
InactiveLimit=0
MinJobAge=600
KillWait=10
CONF
}

# slurm_munge DIR [PREFIX...]: starts munged with a fresh key and its socket in DIR (PREFIX runs it
# elsewhere, e.g. on a host of tests/multinode/hosts.sh), and waits for the socket.
slurm_munge() {
  local dir=$1
  shift
  head -c 1024 /dev/urandom >"$dir/munge.key"
  chmod 400 "$dir/munge.key"
  "$@" munged -F -f --key-file="$dir/munge.key" --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
    --log-file="$dir/log/munged.log" --seed-file="$dir/munged.seed" >"$dir/log/munged.out" 2>&1 &
  slurm_pids+=($!)
  for _ in $(seq 100); do [ -S "$dir/munge.sock" ] && break; sleep 0.05; done
}

# slurm_wait_idle DIR NODES: waits until every node in NODES (a Slurm node list) is idle.
slurm_wait_idle() {
  local dir=$1 nodes=$2 state=""
  for _ in $(seq 300); do
    state=$(sinfo -h -n "$nodes" -o %T 2>/dev/null | sort -u)
    [ "$state" = idle ] && return 0
    sleep 0.1
  done
  echo "FAIL: the test Slurm did not come up (node state '$state'); its logs:"
  tail -n 20 "$dir"/log/*
  exit 1
}

slurm_up() {
  local dir=$1
  slurm_require
  mkdir -p "$dir"/{state,spool/ember0,log,dev}
  dir=$(cd "$dir" && pwd)
  trap slurm_down EXIT
  touch "$dir"/dev/nvidia{0,1,2,3}
  local cpus port=$((20000 + RANDOM % 40000))
  cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' | head -1)
  {
    slurm_conf_common "$dir" "$(hostname -s)" 127.0.0.1 "$port"
    echo "NodeName=ember0 NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 CPUs=${cpus:-1} RealMemory=1000 Gres=gpu:4 State=UNKNOWN"
    echo "PartitionName=debug Nodes=ember0 Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  echo "NodeName=ember0 Name=gpu File=$dir/dev/nvidia[0-3]" >"$dir/gres.conf"
  export SLURM_CONF=$dir/slurm.conf
  slurm_munge "$dir"
  slurmctld -D -i >"$dir/log/slurmctld.out" 2>&1 &
  slurm_pids+=($!)
  slurmd -D -N ember0 >"$dir/log/slurmd.out" 2>&1 &
  slurm_pids+=($!)
  slurm_wait_idle "$dir" ember0
}

# slurm_wait_job ID SECONDS: waits until the job has ended (scontrol keeps it MinJobAge seconds);
# prints its final state.
slurm_wait_job() {
  local id=$1 limit=$2 state=""
  for _ in $(seq $((limit * 10))); do
    state=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
      echo "$state"
      return 0
      ;;
    esac
    sleep 0.1
  done
  echo "${state:-UNKNOWN}"
  return 1
}
