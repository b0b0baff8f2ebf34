#!/usr/bin/env bash
# sbatch_test.sh SOURCE_DIR BUILD_DIR: Ember's training under a real Slurm on this host
# (slurm_cluster.sh): examples/slurm/mnist_ddp.sbatch runs 2 ranks through `srun --mpi=pmix` to
# the end; the same job stopped mid-run by `scancel --signal=TERM --batch` checkpoints, requeues
# itself and resumes from its checkpoint to the end; `ember launch` inside an allocation starts its
# ranks on the allocation; and a rank started by srun without MPI support is refused by name.
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd)
. "$src/tests/slurm/slurm_cluster.sh"
work=$(mktemp -d)
slurm_up "$work/slurm"
trap 'slurm_down; rm -rf "$work"' EXIT
cd "$work" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.out; do echo "== $f" && cat "$f"; done
  tail -n 20 "$work"/slurm/log/*.log
  exit 1
}
example=$src/examples/slurm/mnist_ddp.sbatch

# 1. To the end.
id=$(EMBER_BUILD=$build CKPT=$work/ckpt1 sbatch --parsable -o "$work/run1.out" "$example" \
  --limit 256 --epochs 1 --max-steps 3 --batch-size 32) || fail "sbatch refused the example"
state=$(slurm_wait_job "$id" 300)
[ "$state" = COMPLETED ] || fail "job $id ended $state"
grep -q "Data-parallel over 2 ranks" run1.out || fail "no data-parallel banner in job $id"
[ -f "$work/ckpt1/last.ckpt" ] || fail "job $id left no checkpoint"

# 2. Stopped mid-run: checkpoint, requeue, resume.
id=$(EMBER_BUILD=$build CKPT=$work/ckpt2 sbatch --parsable -o "$work/run2.out" "$example" \
  --limit 4096 --epochs 2 --batch-size 16) || fail "sbatch refused the example"
for _ in $(seq 1200); do grep -q "^epoch 1/2 " run2.out 2>/dev/null && break; sleep 0.1; done
grep -q "^epoch 1/2 " run2.out || fail "job $id never started training"
scancel --signal=TERM --batch "$id" || fail "scancel refused"
stopped=$SECONDS
# Slurm holds a requeued job back for about two minutes (its BeginTime): slurmd refuses to start a
# job it has just killed ("already killed, do not launch batch job") until its cleanup is done.
# The test lets it go after 10 s instead.
for _ in $(seq 600); do
  scontrol show job "$id" | grep -q "JobState=PENDING" && break
  sleep 0.1
done
sleep 10
scontrol update JobId="$id" StartTime=now
state=$(slurm_wait_job "$id" 600)
[ "$state" = COMPLETED ] || fail "job $id ended $state after its preemption"
echo "the preempted job ran again and finished $((SECONDS - stopped)) s after its SIGTERM"
grep -q "exiting with status 75 (preempted)" run2.out || fail "the ranks did not checkpoint on SIGTERM"
grep -q "requeueing job $id" run2.out || fail "the script did not requeue the job"
grep -q "restart 1" run2.out || fail "Slurm did not run the job again"
grep -q "Resumed from $work/ckpt2" run2.out || fail "the requeued job did not resume from its checkpoint"

# 3. ember launch inside an allocation: mpirun places the ranks on the allocation's tasks.
id=$(sbatch --parsable -n 2 -o "$work/run3.out" --wrap \
  "$build/tools/ember launch -n 2 -- sh -c 'echo rank \$OMPI_COMM_WORLD_RANK of \$OMPI_COMM_WORLD_SIZE in job \$SLURM_JOB_ID'") ||
  fail "sbatch --wrap refused"
state=$(slurm_wait_job "$id" 120)
[ "$state" = COMPLETED ] || fail "the ember launch job $id ended $state"
for r in 0 1; do grep -q "^\[rank $r\] rank $r of 2 in job $id" run3.out || fail "no rank $r in job $id"; done

# 4. srun without MPI support gives every task a world of one: refused, not trained twice.
id=$(sbatch --parsable -n 2 -o "$work/run4.out" --wrap \
  "srun --mpi=none $build/examples/mnist_cnn --data-parallel --limit 64 --max-steps 1") || fail "sbatch --wrap refused"
state=$(slurm_wait_job "$id" 120)
[ "$state" = FAILED ] || fail "a data-parallel rank without MPI ran ($state)"
grep -q "srun --mpi=pmix" run4.out || fail "the refusal does not say how to start the ranks"
echo PASS
