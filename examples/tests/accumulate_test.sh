#!/usr/bin/env bash
# accumulate_test.sh MPIEXEC MNIST_CNN: gradient accumulation on real ranks. Two data-parallel ranks
# train 4 Adam steps of the MNIST CNN (no dropout, no batch norm: the same update either way) with
# each rank's 16 examples in one pass and in 3 micro-batches (6 + 5 + 5); their metrics logs agree
# to float rounding (the sums are taken in another order). An all-reduce after every micro-batch
# would agree too (averaging is linear): that it happens once, after the last, is
# DataParallel.MicroBatchesUnderNoSync... (tests/dist). A pipeline job refuses --accumulate before
# MPI starts.
set -u
mpiexec=$1 mnist=$2
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

for n in 1 3; do
  "$mpiexec" -np 2 --oversubscribe "$mnist" --data-parallel --limit 256 --epochs 1 --max-steps 4 --batch-size 32 \
    --accumulate $n --checkpoint-dir "$dir/acc$n" >"$dir/out$n" 2>&1 || { cat "$dir/out$n"; fail "--accumulate $n failed"; }
done
cat "$dir/acc1/metrics.csv" "$dir/acc3/metrics.csv"
# Every number of the row but the seconds: within 1e-4, relative.
awk -F, 'FNR == 1 { for (i = 1; i <= NF; i++) col[i] = $i; next }
         NR == FNR { for (i = 1; i <= NF; i++) one[FNR, i] = $i; rows = FNR; next }
         { for (i = 1; i <= NF; i++) if (col[i] != "seconds") {
             a = one[FNR, i] + 0; b = $i + 0; d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a
             if (d > 1e-4 * (m > 1 ? m : 1)) { printf "row %d %s: %s without, %s with\n", FNR, col[i], one[FNR, i], $i; bad = 1 } }
           seen = FNR }
         END { if (seen != rows || rows < 2) { print "the logs have different rows"; bad = 1 }; exit bad }' \
  "$dir/acc1/metrics.csv" "$dir/acc3/metrics.csv" || fail "3 micro-batches per step trained differently from one pass"

"$mnist" --pipeline 2 --accumulate 2 --limit 64 >"$dir/pipe" 2>&1
status=$?
cat "$dir/pipe"
[ $status -eq 1 ] && grep -q -- "--accumulate 2: a pipeline already runs each batch as --micro-batches" "$dir/pipe" ||
  fail "a pipeline with --accumulate was not refused by name (status $status)"
echo "accumulate_test: passed"
