#!/usr/bin/env bash
# Fuzzes one target for a while: scripts/fuzz.sh TARGET SECONDS [BUILD_DIR]
#   TARGET     idx, image, checkpoint, job_spec, trace, wire, shm_allreduce, model_file or elastic
#              (tests/fuzz/fuzz_TARGET.cpp)
#   SECONDS    how long libFuzzer runs
#   BUILD_DIR  a build configured with -DEMBER_FUZZ=ON (clang) whose fuzz_TARGET is built (as the
#              ctest fuzz.TARGET.run passes); left out: build-fuzz, configured (clang, ASan +
#              UBSan, -O1) and brought up to date here
# Seeds come from tests/fuzz/corpus/TARGET (never modified here); what the run finds interesting
# goes to BUILD_DIR/fuzz/TARGET/corpus, crashes to BUILD_DIR/fuzz/TARGET/. The last line is the
# summary: executions, executions per second, coverage (edges and features), corpus size, crashes.
# Exit status 0 when the run found nothing; 1 on a crash, leak, sanitizer report, timeout (an input
# taking over 10 s) or memory over 4 GiB, with the input saved: fix the bug, then add the input to
# tests/fuzz/corpus/TARGET as a regression test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $# -lt 2 ]]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
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
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
"$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/" \
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
# libFuzzer stops at its first finding with a non-zero status: a clean run found none.
echo "fuzz $target: ${execs:-0} executions in $seconds s (${rate:-0}/s), ${cov:-cov: ?}, crashes: 0"
