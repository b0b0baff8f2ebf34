#!/usr/bin/env bash
# `ember sched train-policy` reproduces a committed network byte for byte: the shipped network's
# command (docs/scheduler/learned.md) at a reduced size (6 iterations, 300-job windows, 2 rollouts,
# the first 100,000 s of the Philly week), at the avx2 level and with OpenBLAS's Haswell kernels
# named, so that every x86-64 CPU with AVX2 runs the same instructions (OpenBLAS otherwise picks its
# kernels by CPU model, and they round differently). The reference,
# tests/scheduler/data/policy_small_avx2.ckpt, was written by this same command; a change to the
# simulator, the features, the network, the optimiser or the exploration that moves one weight
# fails here, and the reference must then be rewritten on purpose (EMBER_UPDATE_REFERENCE=1).
# Usage: train_policy_reproduces.sh <ember program> <philly_w41.csv> <reference.ckpt>
set -uo pipefail
ember=$(realpath "${1:?usage: train_policy_reproduces.sh <ember> <trace> <reference>}")
trace=${2:?usage: train_policy_reproduces.sh <ember> <trace> <reference>}
reference=$(realpath -m "${3:?usage: train_policy_reproduces.sh <ember> <trace> <reference>}")
if [[ ! -f $trace ]]; then
  if [[ ${EMBER_REQUIRE_SHARED_DATA:-} == 1 ]]; then echo "FAIL: no $trace"; exit 1; fi
  echo "skipped: no $trace"
  exit 77
fi
# ember info's output taken whole: `| grep -q` could end the pipe early (SIGPIPE under pipefail).
info=$("$ember" info)
if ! grep -qE '^levels usable:.*avx2' <<<"$info"; then
  echo "skipped: this build or CPU has no avx2 level"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The command is stored in the checkpoint's metadata: the same relative names every time.
ln -s "$(realpath "$trace")" "$work/philly_w41.csv"
(cd "$work" && EMBER_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell "$ember" sched train-policy \
  --trace philly_w41.csv --out policy_small.ckpt --iterations 6 --eval-every 3 --gpus 128 \
  --window 300 --rollouts 2 --val-windows 1 --train-until 100000 >train.log 2>&1) || {
  echo "FAIL: train-policy exited $?"
  tail -5 "$work/train.log"
  exit 1
}
if [[ ${EMBER_UPDATE_REFERENCE:-} == 1 ]]; then
  cp "$work/policy_small.ckpt" "$reference"
  echo "wrote $reference"
  exit 0
fi
if cmp "$work/policy_small.ckpt" "$reference"; then
  echo "ok: the network is the reference byte for byte ($(tail -1 "$work/train.log"))"
else
  echo "FAIL: the network differs from $reference ($(tail -1 "$work/train.log"))"
  exit 1
fi
