#!/usr/bin/env bash
# Tests scripts/check-layering.sh on a small tree that breaks the layering in known ways.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/../../scripts/check-layering.sh" "$here/fixtures/layering" 2>&1)
rc=$?
echo "$out"
failures=0
check() {
  if grep -qF -- "$1" <<<"$out"; then echo "ok   reports $1"; else echo "FAIL does not report $1"; failures=$((failures + 1)); fi
}
[[ $rc -ne 0 ]] || { echo "FAIL exit code 0 on a broken tree"; failures=$((failures + 1)); }
check "core/upward.h:7: includes layers/linear.h"
check "core/upward.h:8: includes models/mnist_cnn.h"
check "data/sideways.cpp:3: includes scheduler/placement.h"
check "scheduler/parallel/reaches_jobs.cpp:3: includes scheduler/policy.h"
check "scheduler/reaches_parallel.cpp:4: includes core/tensor.h"
check "scheduler/reaches_parallel.cpp:5: includes scheduler/parallel/comm.h"
check "6 violations"
echo "$((8 - failures)) passed, $failures failed"
((failures == 0))
