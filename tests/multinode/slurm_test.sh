#!/usr/bin/env bash
# slurm_test.sh SOURCE_DIR BUILD_DIR: a Slurm cluster of two nodes, nodeA and nodeB, each a host of
# tests/multinode/hosts.sh with its own slurmd (NodeName/NodeAddr per host; slurmctld and munged
# on nodeA, munge's socket shared through the test's folder), and Ember's data-parallel example
# across them: examples/slurm/mnist_ddp.sbatch submitted with -N 2 (srun --mpi=pmix starts one
# rank per node), `srun -N 2` directly, and `ember launch` inside a two-node allocation (mpirun
# starts its daemons through Slurm); `ember sched serve --backend slurm` sees both nodes. Skipped without Slurm or root (failing instead under CI=true
# when it is root that is missing).
set -euo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
. "$src/tests/multinode/hosts.sh"
. "$src/tests/slurm/slurm_cluster.sh"
slurm_require
work=$PWD/multinode-slurm-$$
rm -rf "$work"
hosts_up "$work/hosts" nodeA nodeB
trap 'slurm_down; hosts_down; rm -rf "$work"' EXIT
dir=$work/slurm
mkdir -p "$dir"/{state,spool/nodeA,spool/nodeB,log}
cd "$work"
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out; do [ -f "$f" ] && echo "== $f" && cat "$f"; done
  tail -n 20 "$dir"/log/*
  exit 1
}
cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' | head -1)
{
  slurm_conf_common "$dir" nodeA "$(hosts_addr 1)" $((20000 + RANDOM % 40000))
  echo "NodeName=nodeA NodeAddr=$(hosts_addr 1) CPUs=${cpus:-1} RealMemory=1000 State=UNKNOWN"
  echo "NodeName=nodeB NodeAddr=$(hosts_addr 2) CPUs=${cpus:-1} RealMemory=1000 State=UNKNOWN"
  echo "PartitionName=debug Nodes=nodeA,nodeB Default=YES MaxTime=INFINITE State=UP"
} >"$dir/slurm.conf"
# Slurm reads gres.conf beside slurm.conf when GresTypes is set; these nodes have no GPUs.
: >"$dir/gres.conf"
export SLURM_CONF=$dir/slurm.conf
slurm_munge "$dir" "$HOSTS_DIR/on" nodeA
"$HOSTS_DIR/on" nodeA slurmctld -D -i >"$dir/log/slurmctld.out" 2>&1 &
slurm_pids+=($!)
for h in nodeA nodeB; do
  "$HOSTS_DIR/on" $h slurmd -D -N $h >"$dir/log/slurmd.$h.out" 2>&1 &
  slurm_pids+=($!)
done
# The Slurm commands talk to slurmctld at nodeA's address: they run on a host too.
sl() { on nodeA "$@"; }
for _ in $(seq 300); do
  state=$(sl sinfo -h -o %T 2>/dev/null | sort -u)
  [ "$state" = idle ] && break
  sleep 0.1
done
[ "$state" = idle ] || fail "the two nodes did not come up (state '$state')"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
small="--limit 256 --epochs 1 --max-steps 3 --batch-size 32"
wait_job() {  # ID: its final state
  local id=$1 s=""
  for _ in $(seq 1800); do
    s=$(sl scontrol show job "$id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $s in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL) break ;; esac
    sleep 0.1
  done
  echo "$s"
}

# 1. The batch script over two nodes, one rank on each.
id=$(EMBER_BUILD=$build CKPT=$work/ckpt sl sbatch --parsable -N 2 --ntasks-per-node=1 -o "$work/sbatch.out" \
  "$src/examples/slurm/mnist_ddp.sbatch" $small) || fail "sbatch -N 2 refused the example"
state=$(wait_job "$id")
[ "$state" = COMPLETED ] || fail "job $id ended $state"
grep -q "on nodeA,nodeB, 2 ranks" sbatch.out || fail "job $id did not run on both nodes"
grep -q "Data-parallel over 2 ranks" sbatch.out || fail "no data-parallel banner in job $id"
[ -f "$work/ckpt/last.ckpt" ] || fail "job $id left no checkpoint"

# 2. srun -N 2 directly (an allocation of its own): each rank names its host and node-local rank.
sl srun -N 2 --ntasks-per-node=2 --mpi=pmix -o "$work/srun.out" "$build/tests/ember_dist_tests" \
  --gtest_filter='MpiComm.RankSizeAndLocalRank:MpiComm.LocalRanks*:MpiComm.AllReduceGoes*:Ddp.*' ||
  fail "srun -N 2 of the dist suite failed"
grep -q "PASSED" srun.out || fail "no gtest summary from srun"

# 3. ember launch inside a two-node allocation: mpirun places its daemons through Slurm.
id=$(sl sbatch --parsable -N 2 --ntasks-per-node=1 -o "$work/launch.out" --wrap \
  "$build/tools/ember launch -n 2 -- sh -c 'echo rank \$OMPI_COMM_WORLD_RANK on \$(hostname)'") || fail "sbatch --wrap refused"
state=$(wait_job "$id")
[ "$state" = COMPLETED ] || fail "the ember launch job $id ended $state"
grep -q "^\[rank 0\] rank 0 on nodeA" launch.out && grep -q "^\[rank 1\] rank 1 on nodeB" launch.out ||
  fail "the ranks of job $id did not land one on each node"
# 4. The daemon's Slurm backend sees both nodes as its pool, runs a job on one of them and a gang
# over both.
"$HOSTS_DIR/on" nodeA "$build/tools/ember" sched serve --backend slurm --state "$work/sched" --policy fcfs \
  >"$work/daemon.out" 2>&1 &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null || true; slurm_down; hosts_down; rm -rf "$work"' EXIT
sched() { on nodeA "$build/tools/ember" sched "$1" --state "$work/sched" "${@:2}"; }
for _ in $(seq 100); do sched status >/dev/null 2>&1 && break; sleep 0.1; done
grep -q "on 2 Slurm node(s): nodeA nodeB" daemon.out || fail "the daemon's pool is not the two Slurm nodes"
job=$(sched submit --name hello --devices 1 --workdir "$work" -- sh -c 'echo ran on $(hostname)' |
  sed -n 's/^submitted job \([0-9]*\).*/\1/p')
[ -n "$job" ] || fail "the daemon refused a job"
for _ in $(seq 300); do
  st=$(sched status --job "$job" | sed -n 's/^job [0-9]* ([^)]*): \([a-z]*\)$/\1/p')
  [ "$st" = done ] && break
  sleep 0.1
done
[ "$st" = done ] || fail "the daemon's job is $st"
grep -q -E "ran on node[AB]" "$work/sched/jobs/$job/output.log" || fail "the daemon's job did not run on a node"
# A gang wider than one node (4 CPU devices; each node has 2): one Slurm job over both nodes, a
# task on each, which srun reaches from the batch script.
gang=$(sched submit --name gang --devices 4 --workdir "$work" -- sh -c 'srun hostname' |
  sed -n 's/^submitted job \([0-9]*\).*/\1/p')
[ -n "$gang" ] || fail "the daemon refused the gang"
for _ in $(seq 300); do
  st=$(sched status --job "$gang" | sed -n 's/^job [0-9]* ([^)]*): \([a-z]*\)$/\1/p')
  case $st in done | failed) break ;; esac
  sleep 0.1
done
cat daemon.out "$work/sched/jobs/$gang/output.log"
[ "$st" = done ] || fail "the daemon's two-node gang is $st"
grep -q "Slurm job [0-9]* on nodeA,nodeB" daemon.out || fail "the gang was not one Slurm job on both nodes"
grep -q "^nodeA$" "$work/sched/jobs/$gang/output.log" && grep -q "^nodeB$" "$work/sched/jobs/$gang/output.log" ||
  fail "the gang's tasks did not run on both nodes"
cat sbatch.out srun.out launch.out "$work/sched/jobs/$job/output.log"
echo PASS
