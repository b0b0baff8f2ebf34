#!/usr/bin/env bash
# Tests bench/compare_builds.sh and bench/compare_builds_summary.py on two fake build trees whose
# bench program prints a table the way bench/layers does: the rounds alternate, every output is
# kept, and the summary's raw and drift-corrected ratios are the ones the tables give.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=$here/../../bench
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
# Build A: row "fast" twice B's rate, row "same" equal; libtorch runs at 0.5 of B's speed in A's
# process on every row (the machine was slower), so corrected gives fast 4.00 and same 2.00.
fake() {  # fake DIR EMBER_FAST EMBER_SAME TORCH
  mkdir -p "$1/bench"
  cat >"$1/bench/prog" <<PROG
#!/bin/sh
echo "cpu: test"
echo
echo "| what | size | ember | ember ms | libtorch | libtorch ms | ratio |"
echo "|---|---|---|---|---|---|---|"
echo "| fast | 1x1 | $2 GFLOP/s | 1.0 | $4 GFLOP/s | 1.0 | 1.0 |"
echo "| same | 2x2 | $3 GB/s | 1.0 | $4 GB/s | 1.0 | n/a |"
echo
echo "after the table: ignored | x |"
PROG
  chmod +x "$1/bench/prog"
}
fake "$tree/a" 20 10 5
fake "$tree/b" 10 10 10
failures=0
check() {
  if grep -qF -- "$2" <<<"$1"; then echo "ok   $3"; else echo "FAIL $3: no '$2' in"; echo "$1"; failures=$((failures + 1)); fi
}
"$bench/compare_builds.sh" "$tree/a" "$tree/b" 3 "$tree/out" prog 2>"$tree/log"
rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL compare_builds.sh failed"; cat "$tree/log"; failures=$((failures + 1)); }
log=$(cat "$tree/log")
check "$log" "round 2, b: $tree/b/bench/prog" "round 2 starts with B"
for f in prog.a.1.txt prog.b.1.txt prog.a.3.txt prog.b.3.txt; do
  [[ -s $tree/out/$f ]] || { echo "FAIL no output $f"; failures=$((failures + 1)); }
done
out=$(python3 "$bench/compare_builds_summary.py" "$tree/out" prog 2>&1)
check "$out" "prog: 3 rounds" "counts the rounds"
check "$out" "per round: 0.50 / 0.50 / 0.50" "drift from libtorch's rows"
check "$out" "| fast, 1x1 | 2.00 / 2.00 / 2.00 | 2.00 | 4.00 |" "raw and corrected of a faster row"
check "$out" "| same, 2x2 | 1.00 / 1.00 / 1.00 | 1.00 | 2.00 |" "raw and corrected of an equal row"
check "$out" "raw 1.414 (min 1.00), corrected 2.828 (min 2.00)" "geometric means"
# Bad input: a missing program, a bad round count, a table without an Ember column.
"$bench/compare_builds.sh" "$tree/a" "$tree/b" 3 "$tree/out2" nothing 2>"$tree/log"
rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL a missing program is not exit 2"; failures=$((failures + 1)); }
check "$(cat "$tree/log")" "no program $tree/a/bench/nothing" "names the missing program"
"$bench/compare_builds.sh" "$tree/a" "$tree/b" x "$tree/out2" prog 2>"$tree/log"
rc=$?
[[ $rc -eq 2 ]] || { echo "FAIL ROUNDS x is not exit 2"; failures=$((failures + 1)); }
mkdir -p "$tree/bad"
printf '| what | rate | ratio |\n|---|---|---|\n| x | 1 | 1 |\n' >"$tree/bad/prog.a.1.txt"
cp "$tree/bad/prog.a.1.txt" "$tree/bad/prog.b.1.txt"
out=$(python3 "$bench/compare_builds_summary.py" "$tree/bad" prog 2>&1)
rc=$?
[[ $rc -ne 0 ]] || { echo "FAIL a table without an Ember column is accepted"; failures=$((failures + 1)); }
check "$out" "has no 'ember...' column" "names what the table lacks"
out=$(python3 "$bench/compare_builds_summary.py" "$tree/none" prog 2>&1)
rc=$?
[[ $rc -ne 0 ]] || { echo "FAIL an empty folder is accepted"; failures=$((failures + 1)); }
check "$out" "no rounds in $tree/none" "says there are no rounds"
if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
