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
check "dist/reaches_jobs.cpp:3: includes scheduler/policy.h"
check "dist/reaches_train.cpp:2: includes train/trainer.h"
# The training library: what lies below it is accepted (lines 3-5), the scheduler and tools/ not.
check "train/uses_lower.cpp:6: includes scheduler/policy.h"
check "train/uses_lower.cpp:7: includes tools/command.h"
check "scheduler/reaches_dist.cpp:4: includes core/tensor.h"
check "scheduler/reaches_dist.cpp:5: includes dist/comm.h"
# Inside core/: the tensor layer, the op umbrella, ops, autograd and the two kernel folders.
check "core/reaches_ops.cpp:4: includes core/ops.h"
check "core/reaches_ops.cpp:5: includes core/ops/elementwise.h"
check "core/reaches_ops.cpp:6: includes core/autograd/node.h"
check "core/reaches_ops.cpp:7: includes core/cpu/loops.h"
check "core/ops.h:5: includes core/autograd/node.h"
check "core/ops/reaches_kernels.cpp:6: includes core/cpu/loops.h"
check "core/ops/reaches_kernels.cpp:7: includes core/cuda/launch.h"
check "core/autograd/reaches_kernels.cpp:3: includes core/cuda/launch.h"
check "core/cpu/reaches_ops.cpp:5: includes core/ops/reduce.h"
check "core/cpu/reaches_ops.cpp:6: includes core/autograd/grad_mode.h"
check "core/cpu/reaches_ops.cpp:7: includes core/cuda/launch.h"
check "core/cuda/reaches_graph.cu:5: includes core/autograd/node.h"
check "core/cuda/reaches_graph.cu:6: includes core/ops/creation.h"
check "core/cuda/reaches_graph.cu:7: includes core/cpu/loops.h"
# Nothing else: the accepted includes (layers/uses_core.cpp, train/uses_lower.cpp's first three,
# the first lines of each core fixture) would raise the count.
check "23 violations"
echo "$((25 - failures)) passed, $failures failed"
((failures == 0))
