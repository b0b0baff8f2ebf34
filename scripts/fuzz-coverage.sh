#!/usr/bin/env bash
# Line coverage of each reader of outside input by its fuzz corpus:
#   scripts/fuzz-coverage.sh [--rev REV] [BUILD_DIR]
#   --rev REV   replay the corpora as commit REV holds them (e.g. the seeds before a merge);
#               default: tests/fuzz/corpus as it is in the checkout
#   BUILD_DIR   default build-cov: configured here with clang and -DEMBER_FUZZ_COVERAGE=ON (the
#               parsers' libraries with source-based coverage, tests/fuzz/CMakeLists.txt) and
#               brought up to date
# Each fuzz_TARGET replays its corpus once (replay_main.cpp, as the fuzz.TARGET.corpus tests do),
# writing a profile; llvm-cov report then gives the lines of the target's reader(s) that ran. The
# output is a Markdown table: target, corpus files, reader source, lines, lines covered.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rev=""
if [[ ${1:-} == --rev ]]; then
  [[ $# -ge 2 ]] || { echo "fuzz-coverage.sh: --rev needs a commit" >&2; exit 2; }
  rev=$2
  shift 2
fi
build=${1:-$root/build-cov}

# Each target and the source file(s) of the reader it fuzzes (other files it reaches are not its
# reader: the tensor engine, Protobuf, stb).
readers=(
  "idx data/idx.cpp"
  "image data/image.cpp"
  "checkpoint layers/checkpoint.cpp"
  "job_spec scheduler/daemon/job_spec.cpp"
  "trace scheduler/sim/trace.cpp"
  "wire scheduler/daemon/wire.cpp"
  "shm_allreduce dist/shm_allreduce.cpp"
  "model_file interop/model_file.cpp interop/model_file_layers.cpp"
  "csv data/csv_dataset.cpp"
  "text_corpus data/text_corpus.cpp"
  "vocabulary data/vocabulary.cpp"
  "speeds scheduler/speeds.cpp"
  "teams scheduler/teams.cpp"
  "tfrecord interop/tfrecord.cpp"
  "slurm scheduler/daemon/slurm_output.cpp"
  "daemon_config scheduler/daemon/access.cpp"
)

if ! grep -qs '^EMBER_FUZZ_COVERAGE:BOOL=ON' "$build/CMakeCache.txt"; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DEMBER_BUILD_TESTS=ON \
    -DEMBER_FUZZ_COVERAGE=ON -DEMBER_FUZZ=OFF -DEMBER_SANITIZE=OFF -DEMBER_CPU_DISPATCH=OFF -DEMBER_CUDA=OFF \
    -DEMBER_BUILD_BENCH=OFF -DEMBER_BUILD_EXAMPLES=OFF >/dev/null
fi
targets=()
for r in "${readers[@]}"; do targets+=("fuzz_${r%% *}"); done
ninja -C "$build" "${targets[@]}" >"$build/fuzz-coverage-build.log" 2>&1 ||
  { tail -30 "$build/fuzz-coverage-build.log" >&2; echo "fuzz-coverage.sh: the build failed" >&2; exit 1; }

# The libraries that hold the readers (shared or static: llvm-cov reads the mapping from each).
objects=()
for lib in data layers scheduler dist interop; do
  for f in "$build/$lib"/libember_"$lib".so "$build/$lib"/libember_"$lib".a; do
    if [[ -f $f ]]; then objects+=(-object "$f"); fi
  done
done
corpus=$root/tests/fuzz/corpus
work=$build/fuzz-coverage
rm -rf "$work"
mkdir -p "$work"
if [[ -n $rev ]]; then
  git -C "$root" archive "$rev" tests/fuzz/corpus | tar -x -C "$work"
  corpus=$work/tests/fuzz/corpus
fi

echo "| target | corpus files | reader | lines | covered |"
echo "|--------|-------------:|--------|------:|--------:|"
for r in "${readers[@]}"; do
  read -r t sources <<<"$r"
  if [[ ! -d $corpus/$t ]]; then
    echo "| $t | 0 | (no corpus at ${rev:-the checkout}) | | |"
    continue
  fi
  files=$(find "$corpus/$t" -type f | wc -l)
  # One profile per module (%m): the parsers' libraries are shared, each with its own runtime.
  LLVM_PROFILE_FILE="$work/$t-%m.profraw" "$build/tests/fuzz/fuzz_$t" "$corpus/$t" >"$work/$t.log" 2>&1 ||
    { cat "$work/$t.log" >&2; echo "fuzz-coverage.sh: replaying $t failed" >&2; exit 1; }
  llvm-profdata merge -sparse "$work/$t"-*.profraw -o "$work/$t.profdata"
  for s in $sources; do
    # The reader's row (the build names sources relative to it: ../data/idx.cpp). llvm-cov
    # report's columns: file, regions, missed, cover, functions, missed, executed, lines, missed
    # lines, line cover, ...
    line=$(llvm-cov report "$build/tests/fuzz/fuzz_$t" "${objects[@]}" -instr-profile="$work/$t.profdata" 2>/dev/null |
      awk -v f="$s" '$1 == f || substr($1, length($1) - length(f)) == "/" f { print $8, $9, $10 }')
    [[ -n $line ]] || { echo "fuzz-coverage.sh: llvm-cov reports nothing of $s for $t" >&2; exit 1; }
    read -r lines missed cover <<<"$line"
    echo "| $t | $files | \`$s\` | $lines | $((lines - missed)) ($cover) |"
  done
done
