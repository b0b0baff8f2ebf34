#!/usr/bin/env bash
# launch_test.sh EMBER MNIST_CNN: `ember launch` end to end: rank prefixes, the worst exit status,
# --rank0-only, SIGTERM forwarded to every rank, usage errors, and the README's data-parallel run.
set -u
ember=$1 mnist=$2
fail() { echo "FAIL: $*"; exit 1; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT

"$ember" launch -n 3 -- sh -c 'echo hi from $OMPI_COMM_WORLD_RANK on $EMBER_DEVICE; exit $((OMPI_COMM_WORLD_RANK * 3))' >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 6 ] || fail "expected the worst status 6, got $status"
for r in 0 1 2; do grep -q "^\[rank $r\] hi from $r on cpu" "$out" || fail "no prefixed line from rank $r"; done
grep -q "rank 1: 3; rank 2: 6; returning 6" "$out" || fail "no per-rank status summary"

"$ember" launch -n 2 --rank0-only -- sh -c 'echo out $OMPI_COMM_WORLD_RANK; echo err $OMPI_COMM_WORLD_RANK >&2' >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 0 ] || fail "--rank0-only run failed ($status)"
grep -q "^\[rank 0\] out 0" "$out" || fail "rank 0's output missing"
grep -q "out 1" "$out" && fail "rank 1's stdout shown despite --rank0-only"
grep -q "^\[rank 1\] err 1" "$out" || fail "rank 1's stderr must still show"

# SIGTERM to the launcher reaches every rank's program.
"$ember" launch -n 2 -- sh -c 'trap "echo got TERM; exit 5" TERM; echo ready; sleep 60 & wait' >"$out" 2>&1 &
pid=$!
for _ in $(seq 100); do [ "$(grep -c ready "$out")" -ge 2 ] && break; sleep 0.1; done
kill -TERM $pid
wait $pid
status=$?
cat "$out"
[ $status -eq 5 ] || fail "expected status 5 from the trapped SIGTERM, got $status"
[ "$(grep -c 'got TERM' "$out")" -eq 2 ] || fail "not every rank got SIGTERM"

# Each rank may use every core the launcher may (mpirun's own default pins a job of one or two
# ranks to one core each, its OMP_NUM_THREADS threads with it), unless the user chose a binding.
mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
for n in 1 2; do
  "$ember" launch -n $n -- grep Cpus_allowed_list /proc/self/status >"$out" 2>&1
  cat "$out"
  [ "$(grep -c "Cpus_allowed_list:[[:space:]]*$mine\$" "$out")" -eq $n ] ||
    fail "with -n $n a rank is bound to fewer cores than the launcher's ($mine)"
done
OMPI_MCA_hwloc_base_binding_policy=core "$ember" launch -n 1 -- grep Cpus_allowed_list /proc/self/status >"$out" 2>&1
[ $? -eq 0 ] || fail "a run with the user's own binding policy failed"

"$ember" launch -- true >"$out" 2>&1
[ $? -eq 2 ] && grep -q -- "-n N (the number of ranks) is required" "$out" || fail "missing -n is not a usage error"
"$ember" launch -n 2 >"$out" 2>&1
[ $? -eq 2 ] && grep -q "expected '-- PROGRAM" "$out" || fail "missing program is not a usage error"
"$ember" launch -n 0 -- true >"$out" 2>&1
[ $? -eq 2 ] || fail "-n 0 is not a usage error"
"$ember" launch -n 1 --mpirun /nonexistent/mpirun -- true >"$out" 2>&1
[ $? -eq 1 ] && grep -q "was not found" "$out" || fail "a missing mpirun is not reported"

# A launcher (mpirun) that misses the forwarded SIGTERM is killed after EMBER_LAUNCH_KILL_AFTER
# seconds instead of leaving ember launch waiting forever.
deaf=$(mktemp)
printf '#!/bin/sh\ntrap "" TERM INT\nexec sleep 600\n' >"$deaf"
chmod +x "$deaf"
EMBER_LAUNCH_KILL_AFTER=1 "$ember" launch -n 1 --mpirun "$deaf" -- true >"$out" 2>&1 &
pid=$!
sleep 0.5
kill -TERM $pid
wait $pid
status=$?
rm -f "$deaf"
cat "$out"
grep -q "still runs 1 s after the signal: killing it" "$out" || fail "a launcher deaf to SIGTERM was not killed"
[ $status -ne 0 ] || fail "a killed job returned 0"

# Several ranks of a program asked for neither --data-parallel nor --pipeline would each train the
# whole model and race on one checkpoint folder: every rank refuses, naming the flags, and nothing
# is written. One rank is one process and trains as without the launcher.
rm -rf ckpt_unsplit
"$ember" launch -n 2 -- "$mnist" --limit 64 --epochs 1 --max-steps 1 --batch-size 32 --checkpoint-dir ckpt_unsplit >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 1 ] || fail "2 ranks without --data-parallel: expected status 1, got $status"
for r in 0 1; do
  grep -q "^\[rank $r\] mnist_cnn: started as one of 2 MPI ranks .* without --data-parallel or --pipeline K" "$out" ||
    fail "rank $r did not refuse naming --data-parallel"
done
[ -e ckpt_unsplit ] && fail "a refused run wrote its checkpoint folder"
"$ember" launch -n 1 -- "$mnist" --limit 64 --epochs 1 --max-steps 1 --batch-size 32 --checkpoint-dir ckpt_unsplit >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 0 ] || fail "one rank without --data-parallel failed ($status)"
test -s ckpt_unsplit/last.ckpt || fail "one rank wrote no checkpoint"
rm -rf ckpt_unsplit

# The README's command, shortened.
rm -rf ckpt_launch
"$ember" launch -n 2 --rank0-only -- "$mnist" --data-parallel --limit 256 --epochs 1 --max-steps 3 --batch-size 32 >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 0 ] || fail "mnist_cnn --data-parallel under ember launch failed ($status)"
grep -q "Data-parallel over 2 ranks: shares of each batch 16/16" "$out" || fail "no data-parallel banner"

# A pipeline in bfloat16 (each stage's forward under autocast) trains, and in float16 with each
# stage's loss scaler agreeing on skipped steps.
"$ember" launch -n 2 --rank0-only -- "$mnist" --pipeline 2 --precision bf16 --limit 256 --epochs 1 --max-steps 3 \
  --batch-size 32 >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 0 ] || fail "mnist_cnn --pipeline 2 --precision bf16 failed ($status)"
grep -q "Pipeline: 2 stages" "$out" && grep -q "epoch 1 .*train loss" "$out" || fail "the bf16 pipeline did not train"
"$ember" launch -n 2 --rank0-only -- "$mnist" --pipeline 2 --precision fp16 --limit 256 --epochs 1 --max-steps 3 \
  --batch-size 32 >"$out" 2>&1
status=$?
cat "$out"
[ $status -eq 0 ] || fail "mnist_cnn --pipeline 2 --precision fp16 failed ($status)"
grep -q "Pipeline: 2 stages" "$out" && grep -q "epoch 1 .*train loss" "$out" || fail "the fp16 pipeline did not train"
echo PASS
