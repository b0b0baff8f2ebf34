#!/usr/bin/env bash
# Sets up, builds and runs the test suite three ways: a Release build in build/ (every test, the
# op, layer and model tests once more at each CPU capability level this build has), a second
# compiler (clang) in build-clang/ building the libraries and the core and layer tests with
# warnings as errors and running those tests, then an AddressSanitizer + UndefinedBehaviorSanitizer
# build in build-asan/ (CPU-only: nvcc-compiled code is not instrumented, so the CUDA objects
# would only cost time there; the per-level reruns are left to the Release pass). This is what CI
# runs (.ci/run). The sanitizer pass compiles the baseline kernels only and its test programs at
# -O0, and the clang pass builds at -O1: what keeps CI within 45 minutes on 2 cores (README.md).
# Environment:
#   EMBER_JOBS=N      parallel compile and test jobs (default 2, the CI machine's cores)
#   EMBER_CLANG=0     skip the clang pass
#   EMBER_ASAN=0      skip the sanitizer pass (quicker local runs; CI always runs both)
#   EMBER_CMAKE_ARGS  extra options for both configures, e.g. "-DEMBER_CUDA=OFF"
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${EMBER_JOBS:-2}
# Tests run two processes per core; OpenMP threads that spin while idle would starve each other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
start=$SECONDS
phase_start=$SECONDS
times=()
phase_done() {  # phase_done <name>
  times+=("$(printf '%-22s %4d s' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}

scripts/setup.sh
phase_done setup

# ccache (when installed) keyed on paths relative to the checkout, so that another clone of the
# same sources, as CI makes, reuses the objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [[ -z "${HOME:-}" && -z "${CCACHE_DIR:-}" ]]; then
  export CCACHE_DIR="$root/build-ccache"  # ccache keeps its cache under $HOME otherwise
fi
passed=0
skipped=0

# build_and_test <build dir> <label> <cmake options...>; TARGETS (ninja targets, default all) and
# CTEST_ARGS (a test selection) narrow a pass.
build_and_test() {
  local dir=$1 label=$2
  shift 2
  # shellcheck disable=SC2086  # EMBER_CMAKE_ARGS, TARGETS and CTEST_ARGS are lists of words
  cmake -S . -B "$dir" -G Ninja "$@" ${EMBER_CMAKE_ARGS:-}
  # shellcheck disable=SC2086
  ninja -C "$dir" -j "$jobs" ${TARGETS:-}
  phase_done "$label build"
  # shellcheck disable=SC2086
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout 900 ${CTEST_ARGS:-} | tee "$dir/ctest.log"
  phase_done "$label tests"
  local total skip
  total=$(sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p' "$dir/ctest.log" | tail -1)
  skip=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$dir/ctest.log" || true)
  passed=$((passed + ${total:-0} - skip))
  skipped=$((skipped + skip))
}

build_and_test build release -DCMAKE_BUILD_TYPE=Release

if [[ "${EMBER_CLANG:-1}" != 0 ]]; then
  # Debian's clang: every library, and the core and layer test programs, warning-free (-Werror
  # through CMake, so configure checks are unaffected) at every kernel level; those tests at the
  # default CPU level. At -O1 with assertions on: clang's warnings come from its front end, which
  # -O3 does not change, and -O1 compiles the kernels in less than half the time (the optimised
  # build users run is the Release pass above).
  CC=clang CXX=clang++ TARGETS="ember_core_tests ember_layers_tests resume_check ember_models ember_scheduler ember_data ember_interop" \
    CTEST_ARGS="-L ^(core|layers)$ -LE cpu_levels" \
    build_and_test build-clang clang -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
    -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DEMBER_CUDA=OFF -DEMBER_BUILD_BENCH=OFF -DEMBER_BUILD_EXAMPLES=OFF
fi

if [[ "${EMBER_ASAN:-1}" != 0 ]]; then
  # Leaks, use-after-return and initialisation order are errors too; UBSan stops at the first
  # finding (the build also passes -fno-sanitize-recover=undefined).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1:halt_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # -O1 (with assertions on): sanitized code compiles about twice as fast as at -O3, and the
  # reports stay readable.
  # The baseline kernels only (EMBER_CPU_DISPATCH=OFF): the Release pass runs every level, and
  # each level compiled sanitized would cost CI about four minutes.
  CTEST_ARGS="-LE cpu_levels" \
    build_and_test build-asan asan -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DEMBER_SANITIZE=ON \
    -DEMBER_CPU_DISPATCH=OFF -DEMBER_CUDA=OFF -DEMBER_BUILD_BENCH=OFF
fi

echo "scripts/test.sh: done in $((SECONDS - start)) s"
printf '  %s\n' "${times[@]}"
echo "ctest: $passed passed, 0 failed, $skipped skipped"
