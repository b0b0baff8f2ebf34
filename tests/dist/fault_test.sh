#!/usr/bin/env bash
# fault_test.sh MPIEXEC ember_dist_fault MODE: runs the fault program on real ranks and checks
# that the survivors say what happened and exit (ctest's TIMEOUT is the time bound).
set -u
mpiexec=$1 prog=$2 mode=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
case $mode in
  kill|ddp|pipeline_throw|pipeline_kill|device_wait)  np=3 ;;
  *)     np=2 ;;
esac
# --enable-recovery: mpirun does not kill the job itself when a rank dies, so this tests Ember's
# own detection (without it mpirun would end the others too, which is what users normally get).
# In that mode mpirun's own status says nothing, so each rank's status is printed by a shell.
"$mpiexec" -np $np --oversubscribe --enable-recovery \
  bash -c '"$0" "$1"; echo "status of rank $OMPI_COMM_WORLD_RANK: $?"' "$prog" "$mode" >"$out" 2>&1
cat "$out"
fail() { echo "FAIL ($mode): $*"; exit 1; }
status_of() { grep -q "status of rank $1: $2\$" "$out" || fail "rank $1 did not exit with status $2"; }
# The failing stage exits with 1 from its own error, or with 76 when, shutting down, it hears that
# a neighbour gave up first.
failed_status_of() { grep -q -E "status of rank $1: (1|76)\$" "$out" || fail "rank $1 did not exit with status 1 or 76"; }
# Ranks 0 and 2 outlive rank 1: the first to notice reports the dead rank; the other reports either
# the same or, when that news came first, that a rank gave up; both exit with status 76.
survivors_report() {
  grep -q "rank [02] of 3: rank 1 stopped responding" "$out" || fail "no survivor reported the dead rank"
  for r in 0 2; do
    grep -q -E "rank $r of 3: rank (1 stopped responding|[02] gave up)" "$out" || fail "rank $r said nothing"
    status_of $r 76
  done
}
case $mode in
  kill)
    survivors_report
    status_of 1 137
    grep -q "exiting with status 76" "$out" || fail "no exit status in the message"
    grep -q "finished" "$out" && fail "a survivor claims it finished"
    ;;
  ddp)
    survivors_report
    grep -q "this rank was waiting on #[0-9]* all_reduce sum 'bucket 0 of step 3'" "$out" || fail "the report does not name the bucket"
    status_of 1 137
    ;;
  leave)
    grep -q "rank 0 of 2: rank 1 shut its communicator down" "$out" || fail "rank 0 did not report the early exit"
    grep -q "all_reduce sum 'step 3'" "$out" || fail "the report does not name the collective"
    status_of 0 76
    # Rank 1, shutting down, hears at once that rank 0 gave up, rather than after a missed heartbeat.
    grep -q "rank 1 of 2: rank 0 gave up while this rank was shutting down" "$out" || fail "rank 1 did not hear rank 0 give up"
    status_of 1 76
    ;;
  pipeline_throw)
    grep -q "rank 1: pipeline stage 1 of 3 (rank 1, layers 2-2: Fault): a planted failure in step 3" "$out" ||
      fail "stage 1 did not name itself in its error"
    failed_status_of 1
    for r in 0 2; do
      grep -q -E "rank $r of 3: rank (1 shut its communicator down .* while this rank waits on (recv|send)|[012] gave up)" "$out" ||
        fail "rank $r did not say that it lost stage 1"
      status_of $r 76
    done
    ;;
  pipeline_kill)
    survivors_report
    status_of 1 137
    ;;
  device_wait)
    survivors_report
    status_of 1 137
    [ "$(grep -c "this rank was waiting on NCCL #4 all_reduce sum 'bucket 1 of step 3'" "$out")" -eq 2 ] ||
      fail "not every survivor named the incomplete device operation"
    ;;
  pipeline_mismatch)
    grep -q "rank 1: pipeline stage 1 of 2 (rank 1, layers 2-3: Fault..Linear): stage 0 (rank 0) splits the batch into 4 micro-batches, this stage into 3" "$out" ||
      fail "stage 1 did not report the different micro-batch counts"
    failed_status_of 1
    grep -q "rank 0 of 2: rank 1 shut its communicator down" "$out" || fail "rank 0 did not report losing stage 1"
    status_of 0 76
    ;;
  stall)
    status_of 0 0
    status_of 1 0
    grep -q "stall: rank 0 has waited .* on collective #3 all_reduce sum 'step 3'" "$out" || fail "no stall report from rank 0"
    grep -q "rank 1: launched 3 collectives, waiting on none" "$out" || fail "the report does not say what rank 1 waits on"
    [ "$(grep -c 'finished 8 steps' "$out")" -eq 2 ] || fail "not every rank finished"
    ;;
esac
echo "PASS ($mode)"
