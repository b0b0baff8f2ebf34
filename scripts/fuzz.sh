#!/usr/bin/env bash
# Fuzzes one target for a while: scripts/fuzz.sh TARGET SECONDS [BUILD_DIR] [--merge]
#   TARGET     a fuzz target, tests/fuzz/fuzz_TARGET.cpp (idx, image, csv, tfrecord, slurm, ...)
#   SECONDS    how long libFuzzer runs
#   BUILD_DIR  a build configured with -DEMBER_FUZZ=ON (clang) whose fuzz_TARGET is built (as the
#              ctest fuzz.TARGET.run passes); left out: build-fuzz, configured (clang, ASan +
#              UBSan, -O1) and brought up to date here
#   --merge    after a clean run, merge what it found into tests/fuzz/corpus/TARGET (libFuzzer's
#              -merge=1: an input is added only when it reaches coverage the kept corpus does not,
#              and nothing kept is removed) and print the kept corpus's files and edges before and after
# Seeds come from tests/fuzz/corpus/TARGET (modified only by --merge), keywords from
# tests/fuzz/dict/TARGET.dict where there is one; what the run finds interesting
# goes to BUILD_DIR/fuzz/TARGET/corpus, crashes to BUILD_DIR/fuzz/TARGET/. The last line is the
# summary: executions, executions per second, coverage (edges and features), corpus size, crashes.
# Exit status 0 when the run found nothing; 1 on a crash, leak, sanitizer report, timeout (an input
# taking over 10 s) or memory over 4 GiB, with the input saved: fix the bug, then add the input to
# tests/fuzz/corpus/TARGET as a regression test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
merge=0 args=()
for a in "$@"; do
  if [[ $a == --merge ]]; then merge=1; else args+=("$a"); fi
done
set -- "${args[@]+"${args[@]}"}"
if [[ $# -lt 2 ]]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
target=$1 seconds=$2 build=${3:-$root/build-fuzz}
[[ -f $root/tests/fuzz/fuzz_$target.cpp ]] || { echo "fuzz.sh: no fuzz target '$target' (tests/fuzz/fuzz_$target.cpp)" >&2; exit 2; }
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a whole number > 0, got '$seconds'" >&2; exit 2; }

if [[ $# -lt 3 ]]; then
  if ! grep -qs '^EMBER_FUZZ:BOOL=ON' "$build/CMakeCache.txt"; then
    CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DEMBER_SANITIZE=ON -DEMBER_FUZZ=ON -DEMBER_CPU_DISPATCH=OFF -DEMBER_CUDA=OFF \
      -DEMBER_BUILD_BENCH=OFF -DEMBER_BUILD_EXAMPLES=OFF >/dev/null
  fi
  ninja -C "$build" "fuzz_$target" >/dev/null
fi
grep -qs '^EMBER_FUZZ:BOOL=ON' "$build/CMakeCache.txt" ||
  { echo "fuzz.sh: $build is not a build configured with -DEMBER_FUZZ=ON" >&2; exit 2; }
exe=$build/tests/fuzz/fuzz_$target
[[ -x $exe ]] || { echo "fuzz.sh: $exe is not built (ninja -C $build fuzz_$target)" >&2; exit 2; }
work=$build/fuzz/$target
mkdir -p "$work/corpus"
seeds=$root/tests/fuzz/corpus/$target
log=$work/last-run.log
# The kept corpus's file count and edges (libFuzzer's "cov:" after replaying it once).
corpus_coverage() {
  local out
  out=$("$exe" -runs=0 "$seeds" 2>&1) || { echo "$out" | tail -20 >&2; return 1; }
  echo "$(find "$seeds" -type f | wc -l) files, $(grep -oE 'cov: [0-9]+' <<<"$out" | tail -1 | cut -d' ' -f2) edges"
}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The format's keywords, where it has some (libFuzzer splices them into inputs).
dict=() && [[ -f $root/tests/fuzz/dict/$target.dict ]] && dict=(-dict="$root/tests/fuzz/dict/$target.dict")
set +e
"$exe" "${dict[@]+"${dict[@]}"}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/" \
  "$work/corpus" "$seeds" >"$log" 2>&1
status=$?
set -e
execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$log" | tail -1)
rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$log" | tail -1)
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1)
if ((status != 0)); then
  tail -40 "$log"
  echo "fuzz $target: FAILED (status $status) after ${execs:-?} executions; input(s) in $work/ (crash-*, leak-*, timeout-*, oom-*); whole log: $log"
  exit 1
fi
if ((merge)); then
  before=$(corpus_coverage)
  "$exe" -merge=1 -timeout=10 -rss_limit_mb=4096 "$seeds" "$work/corpus" >"$work/merge.log" 2>&1 ||
    { tail -20 "$work/merge.log"; echo "fuzz $target: the merge failed ($work/merge.log)"; exit 1; }
  echo "corpus $target: $before before the merge, $(corpus_coverage) after"
fi
# libFuzzer stops at its first finding with a non-zero status: a clean run found none.
echo "fuzz $target: ${execs:-0} executions in $seconds s (${rate:-0}/s), ${cov:-cov: ?}, crashes: 0"
