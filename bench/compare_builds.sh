#!/usr/bin/env bash
# Runs one benchmark program from two build trees in alternation, ROUNDS times each, on a quiet
# machine, and keeps every output: how the dispatched default build is held against a build with
# other flags (bench/RESULTS.md). The two processes never overlap; the order alternates between
# rounds so that a drift in the machine's speed hits both.
#   bench/compare_builds.sh BUILD_A BUILD_B ROUNDS OUT_DIR PROGRAM [ARGS...]
# e.g. bench/compare_builds.sh build ../ref/build 3 /tmp/cmp train --reps 5 --no-loader
# then bench/compare_builds_summary.py /tmp/cmp train: A over B per row, raw and drift-corrected.
set -euo pipefail
if (($# < 5)); then
  echo "usage: bench/compare_builds.sh BUILD_A BUILD_B ROUNDS OUT_DIR PROGRAM [ARGS...]" >&2
  exit 2
fi
a=$1 b=$2 rounds=$3 out=$4 prog=$5
shift 5
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "compare_builds: ROUNDS must be a whole number >= 1, got '$rounds'" >&2; exit 2; }
for d in "$a" "$b"; do
  [[ -x $d/bench/$prog ]] || { echo "compare_builds: no program $d/bench/$prog" >&2; exit 2; }
done
mkdir -p "$out"
for ((r = 1; r <= rounds; r++)); do
  order=(a b)
  ((r % 2 == 0)) && order=(b a)
  for side in "${order[@]}"; do
    dir=$a
    [[ $side == b ]] && dir=$b
    echo "round $r, $side: $dir/bench/$prog $*" >&2
    "$dir/bench/$prog" "$@" >"$out/$prog.$side.$r.txt" 2>"$out/$prog.$side.$r.err"
  done
done
echo "compare_builds: outputs in $out ($prog.{a,b}.<round>.txt)" >&2
