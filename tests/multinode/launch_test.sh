#!/usr/bin/env bash
# launch_test.sh MODE BUILD_DIR: Ember's distributed training across two hosts, nodeA and nodeB
# (network namespaces joined by a bridge: tests/multinode/hosts.sh), started by `ember launch
# --hosts` through OpenMPI's rsh launcher. MODE:
#   suites     the communicator, DDP, DataParallel and pipeline suites on 2 + 2 ranks over the two
#              hosts, and their node-local checks (local ranks by host, shared memory only within
#              one host) also on 4 ranks of one host and on 1 + 2 ranks
#   train      mnist_cnn data-parallel on 2 + 2 ranks and a 2-stage x 2-replica pipeline (a stage
#              per host) end where one process ends; the checkpoint (one last.ckpt, written by
#              rank 0, and a file per rank) resumes on another layout (1 + 2 ranks, --reshard)
#              and ends where one process does
#   host_lost  nodeB's ranks are killed mid-step: nodeA's ranks exit naming a lost rank and
#              nodeB (within the heartbeat's dead time; ctest's TIMEOUT bounds it)
#   errors     --hosts naming an unknown host, or fewer slots than ranks, is refused by name; ranks
#              that MPI cannot connect (no transport between the hosts) end the job, saying so
set -euo pipefail
mode=$1 build=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/hosts.sh"
# In ctest's folder (not /tmp: each host has its own /tmp), shared by both hosts.
work=$PWD/multinode-$mode-$$
rm -rf "$work"
hosts_up "$work/hosts" nodeA nodeB
trap 'hosts_down; rm -rf "$work"' EXIT
cd "$work"
ember=$build/tools/ember mnist=$build/examples/mnist_cnn
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
fail() {
  echo "FAIL ($mode): $*"
  for f in "$work"/*.out; do [ -f "$f" ] && echo "== $f" && cat "$f"; done
  exit 1
}
# The last row's test loss and accuracy of a metrics log (columns 5 and 6).
test_metrics() { tail -n 1 "$1" | cut -d, -f5,6; }
# Equal within the relative 1e-3 that the examples' distributed tests allow (example.lstm_lm_pipeline).
close() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ","); m = split(b, y, ",");
    if (n != 2 || m != 2) exit 1;
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; if (d > 1e-3 * x[i]) exit 1 } }'
}
expect_like_one_process() {  # LOG REFERENCE_LOG WHAT
  local a b
  a=$(test_metrics "$2") b=$(test_metrics "$1")
  echo "$3: test loss,accuracy $b; one process $a"
  close "$a" "$b" || fail "$3 ended at $b, one process at $a"
}
small="--limit 256 --epochs 1 --batch-size 32"

case $mode in
  suites)
    tests=$build/tests/ember_dist_tests
    on nodeA mpirun -np 4 --host nodeA:2,nodeB:2 "$tests" \
      --gtest_filter='MpiComm.*:Ddp.*:DataParallel*:Pipeline*' >two_hosts.out 2>&1 || fail "the suites failed over two hosts"
    grep -q "PASSED" two_hosts.out || fail "no gtest summary"
    local_checks='MpiComm.LocalRanks*:MpiComm.AllReduceGoes*:MpiComm.AllReduceEvery*'
    on nodeA mpirun -np 4 --oversubscribe --host nodeA:4 "$tests" --gtest_filter="$local_checks" >one_host.out 2>&1 ||
      fail "the node-local checks failed on one host"
    on nodeB mpirun -np 3 --host nodeA:1,nodeB:2 "$tests" --gtest_filter="$local_checks" >uneven.out 2>&1 ||
      fail "the node-local checks failed on 1 + 2 ranks"
    cat two_hosts.out one_host.out uneven.out
    ;;
  train)
    "$mnist" $small --max-steps 4 --log one4.csv >one4.out 2>&1 || fail "one process failed"
    "$mnist" $small --max-steps 8 --log one8.csv >one8.out 2>&1 || fail "one process failed"
    on nodeA "$ember" launch -n 4 --hosts nodeA:2,nodeB:2 -- "$mnist" --data-parallel $small --max-steps 4 \
      --checkpoint-dir ck --log dp4.csv >dp4.out 2>&1 || fail "data-parallel over two hosts failed"
    grep -q "Data-parallel over 4 ranks: shares of each batch 8/8/8/8" dp4.out || fail "no data-parallel banner"
    expect_like_one_process dp4.csv one4.csv "data-parallel, 2 + 2 ranks"
    # One checkpoint, by rank 0 (its log line once), and one file per rank beside it.
    [ "$(grep -c 'Checkpoint written to ck/last.ckpt' dp4.out)" -eq 1 ] || fail "not exactly one rank wrote last.ckpt"
    grep -q '^\[rank 0\] Checkpoint written' dp4.out || fail "last.ckpt was not written by rank 0"
    for r in 0 1 2 3; do [ -s "ck/last.rank$r.ckpt" ] || fail "no checkpoint file of rank $r"; done
    # Resumed on another layout: launched from nodeB, 1 rank on nodeA and 2 on nodeB.
    on nodeB "$ember" launch -n 3 --hosts nodeA:1,nodeB:2 -- "$mnist" --data-parallel $small --max-steps 8 \
      --checkpoint-dir ck --resume auto --reshard --log dp8.csv >dp8.out 2>&1 || fail "the resumed run failed"
    grep -q "Resumed from ck/last.ckpt at step 4 .* (resharded to a new number of ranks)" dp8.out || fail "no resume"
    expect_like_one_process dp8.csv one8.csv "resumed on 1 + 2 ranks"
    # A node-local checkpoint folder (each host's own /tmp): last.ckpt only on rank 0's host, so a
    # resume finds it on some ranks and not on others, which every rank refuses by name instead of
    # half the ranks resuming while the others start afresh.
    on nodeA "$ember" launch -n 4 --hosts nodeA:2,nodeB:2 -- "$mnist" --data-parallel $small --max-steps 2 \
      --checkpoint-dir /tmp/ck >local.out 2>&1 || fail "data-parallel into a node-local folder failed"
    [ -s hosts/nodeA/tmp/ck/last.ckpt ] && [ ! -e hosts/nodeB/tmp/ck/last.ckpt ] || fail "last.ckpt not on rank 0's host alone"
    status=0
    on nodeA "$ember" launch -n 4 --hosts nodeA:2,nodeB:2 -- "$mnist" --data-parallel $small --max-steps 4 \
      --checkpoint-dir /tmp/ck --resume auto >local_resume.out 2>&1 || status=$?
    [ $status -eq 1 ] || fail "resuming from node-local folders: expected status 1, got $status"
    for r in 0 1 2 3; do
      grep -q "^\[rank $r\] .*--resume auto: 2 of 4 ranks find /tmp/ck/last.ckpt .*every host sees" local_resume.out ||
        fail "rank $r did not refuse the node-local checkpoint folder"
    done
    cat local_resume.out
    on nodeA "$ember" launch -n 4 --hosts nodeA:2,nodeB:2 -- "$mnist" --pipeline 2 $small --max-steps 4 \
      --log pp4.csv >pp4.out 2>&1 || fail "the pipeline over two hosts failed"
    grep -q "Pipeline: 2 stages x 2 replicas" pp4.out || fail "no pipeline banner"
    expect_like_one_process pp4.csv one4.csv "pipeline, 2 stages (one per host) x 2 replicas"
    ;;
  host_lost)
    # Many epochs, so that the run is still stepping when nodeB is killed however fast the machine
    # (one epoch of 8192 examples took 2.5 s on a quiet Zen 4 and ended before the kill); it never
    # gets past the kill, so the length costs nothing.
    on nodeA "$ember" launch -n 4 --hosts nodeA:2,nodeB:2 -- "$mnist" --data-parallel --limit 8192 --epochs 1000 \
      --batch-size 16 >lost.out 2>&1 &
    launcher=$!
    # Mid-step: rank 0 has printed its banner and every rank has run for a moment since.
    for _ in $(seq 300); do grep -q "Data-parallel over 4 ranks" lost.out && break; sleep 0.1; done
    grep -q "Data-parallel over 4 ranks" lost.out || fail "training never started"
    sleep 1
    victims=$(hosts_pids nodeB mnist_cnn)
    [ "$(echo $victims | wc -w)" -eq 2 ] || fail "expected nodeB's two ranks, found '$victims'"
    kill -KILL $victims
    status=0
    wait $launcher || status=$?
    cat lost.out
    for r in 0 1; do
      grep -q -E "\[rank $r\] .*rank $r of 4: rank ([23] stopped responding: no heartbeat for [0-9]+ s from host nodeB|[01] gave up)" lost.out ||
        fail "rank $r did not report losing a rank of nodeB"
    done
    grep -q -E "rank [01] of 4: rank [23] stopped responding: .* from host nodeB" lost.out || fail "nobody named nodeB"
    grep -q -E "exit status by rank: rank 0: 76; rank 1: 76" lost.out || fail "nodeA's ranks did not exit with status 76"
    [ "$status" -ne 0 ] || fail "ember launch returned 0"
    ;;
  errors)
    status=0
    on nodeA "$ember" launch -n 2 --hosts nodeA:1,nodeC:1 -- true >unknown.out 2>&1 || status=$?
    cat unknown.out
    [ $status -eq 1 ] || fail "an unknown host: expected status 1, got $status"
    grep -q "ember launch: error: --hosts names 'nodeC', which is not a known host here (.*; this machine is 'nodeA')" unknown.out ||
      fail "the unknown host is not named"
    status=0
    on nodeA "$ember" launch -n 5 --hosts nodeA:2,nodeB:2 -- true >slots.out 2>&1 || status=$?
    cat slots.out
    [ $status -eq 1 ] || fail "too few slots: expected status 1, got $status"
    grep -q "ember launch: error: -n 5 ranks, but --hosts gives only 4 slots (nodeA:2, nodeB:2)" slots.out || fail "slots not named"
    status=0
    on nodeA "$ember" launch -n 3 --hosts nodeA:2,nodeB -- true >default.out 2>&1 || status=$?
    cat default.out
    [ $status -eq 0 ] || fail "a host without a slot count (one slot) was refused ($status)"
    # No MPI transport between the hosts (OpenMPI's shared memory only): the rank that cannot
    # connect says so and ends the job, instead of the others waiting for it forever.
    status=0
    OMPI_MCA_btl=self,vader on nodeA "$ember" launch -n 2 --hosts nodeA:1,nodeB:1 -- "$mnist" --data-parallel \
      --limit 64 --max-steps 1 >transport.out 2>&1 || status=$?
    cat transport.out
    [ $status -ne 0 ] || fail "a job whose ranks cannot reach each other returned 0"
    grep -q "ember dist: MPI cannot connect the ranks (MPI_Comm_dup: .*); check that an MPI transport reaches every host" \
      transport.out || fail "no rank said that MPI cannot connect the ranks"
    status=0
    on nodeA "$ember" launch -n 2 --hosts nodeA:2,:3 -- true >syntax.out 2>&1 || status=$?
    [ $status -eq 2 ] && grep -q "a host without a name" syntax.out || fail "a malformed --hosts is not a usage error"
    ;;
  *) fail "unknown mode '$mode'" ;;
esac
echo "PASS ($mode)"
