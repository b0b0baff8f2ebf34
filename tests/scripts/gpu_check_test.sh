#!/usr/bin/env bash
# Tests scripts/gpu-check.sh as it runs on a machine without a GPU: with the GPU hidden (a
# stand-in nvidia-smi that finds none, CUDA_VISIBLE_DEVICES empty) and an already built tree, it
# must run to its end, exit 0, report the skips, and print the summary table last.
# Usage: gpu_check_test.sh <build dir>
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: gpu_check_test.sh <build dir>}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9\n' >"$tmp/nvidia-smi"
chmod +x "$tmp/nvidia-smi"
failures=0
check() {  # check <name> <condition...>
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}

PATH="$tmp:$PATH" CUDA_VISIBLE_DEVICES="" bash "$here/../../scripts/gpu-check.sh" --build-dir "$build" --skip-build \
  --quick >"$tmp/out" 2>&1
rc=$?
check "exits 0 without a GPU" test "$rc" -eq 0
check "says no GPU was found" grep -q "no GPU found" "$tmp/out"
check "the gpu label reports the skip" grep -qE "ctest -L gpu +\| skipped: no CUDA device" "$tmp/out"
check "bench/gpu reports the skip" grep -qE "bench/gpu +\| skipped: no CUDA device" "$tmp/out"
check "bench/gpu prints n/a rows, no numbers" grep -q "sgemm 1024..8192 .*n/a (no GPU)" "$tmp/out"
check "the summary table is last" bash -c "tail -n 5 '$tmp/out' | head -n1 | grep -q '^| step' && tail -n 1 '$tmp/out' | grep -q '^| bench/gpu'"
check "an unknown flag is refused" bash -c "! bash '$here/../../scripts/gpu-check.sh' --bogus 2>/dev/null"
if ((failures)); then
  echo "---- gpu-check.sh output:"
  cat "$tmp/out"
  exit 1
fi
