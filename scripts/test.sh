#!/usr/bin/env bash
# Sets up, builds and runs the test suite two ways: a Release build with the default compiler (GCC)
# in build/ (every test, the op, layer and model tests once more at each CPU capability level this
# build has), then a second compiler, clang, in build-asan/ with AddressSanitizer +
# UndefinedBehaviorSanitizer, warnings as errors and the fuzz targets linked with libFuzzer: every
# test again, each fuzz target's corpus replayed, and each target fuzzed for 30 s (ctest label
# fuzz); last, clang with ThreadSanitizer in build-tsan, on the tests of code that runs threads
# (the list is below). The sanitizer passes are CPU-only (nvcc-compiled code is not instrumented,
# so the CUDA objects would only cost time there) and compile the baseline kernels only (the
# per-level reruns are the Release pass's). This is what CI runs (.ci/run); README.md says how
# long it takes.
# Environment:
#   EMBER_JOBS=N      parallel compile and test jobs (default 2, the CI machine's cores)
#   EMBER_ASAN=0      skip the clang AddressSanitizer pass (quicker local runs; CI always runs it)
#   EMBER_TSAN=0      skip the ThreadSanitizer pass (likewise)
#   EMBER_CMAKE_ARGS  extra options for both configures, e.g. "-DEMBER_CUDA=OFF"
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${EMBER_JOBS:-2}
# Tests run two processes per core; OpenMP threads that spin while idle would starve each other.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
# In CI the data beside the checkout (../shared/data) must be there: a test that reads a missing
# trace fails instead of skipping (tests/shared_data.h). Elsewhere such tests skip and say so.
if [[ ${CI:-} == true ]]; then export EMBER_REQUIRE_SHARED_DATA=${EMBER_REQUIRE_SHARED_DATA:-1}; fi
start=$SECONDS
phase_start=$SECONDS
times=()
phase_done() {  # phase_done <name>
  times+=("$(printf '%-22s %4d s' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}

scripts/setup.sh all
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

# The fidelity replays (label fidelity: the daemon against the simulator, about three minutes of
# mostly sleeping jobs) and the Slurm tests (label slurm: mostly waiting for Slurm) run in the
# background while the sanitizer passes build, instead of holding the Release pass's two test
# slots; the fidelity test tells the simulator what a start costs on the loaded machine, so the
# comparison holds there (docs/scheduler/simulator.md, fidelity). Collected at the end.
CTEST_ARGS="-LE ^(fidelity|slurm)$" build_and_test build release -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_TESTS=ON
(
  ctest --test-dir build --output-on-failure --timeout 900 -L "^(fidelity|slurm)$" >build/ctest-fidelity.log 2>&1
  echo $? >build/ctest-fidelity.status
) &
fidelity_pid=$!

if [[ "${EMBER_ASAN:-1}" != 0 ]]; then
  # Leaks, use-after-return and initialisation order are errors too; UBSan stops at the first
  # finding (the build also passes -fno-sanitize-recover=undefined).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1:halt_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # Debian's clang: a second compiler's warnings (as errors, through CMake, so configure checks
  # are unaffected) and its sanitizers, in one build. -O1 with assertions on: sanitized code
  # compiles about twice as fast as at -O3 and its reports stay readable; the test programs
  # themselves compile at -O0 (tests/CMakeLists.txt). EMBER_FUZZ links the fuzz targets with
  # libFuzzer and instruments the parsers' libraries for coverage (tests/fuzz/CMakeLists.txt).
  # The baseline kernels only (EMBER_CPU_DISPATCH=OFF): the Release pass runs every level.
  # The kill-and-resume runs (label crash) test exact resume, which the Release pass covers;
  # under the sanitizers each start-up costs seconds, and they would cost CI minutes.
  # The MPI suites at 3 and 4 ranks and the fault runs without shared memory are left to the
  # Release and ThreadSanitizer passes: under ASan they repeat the 2-rank runs' code paths for
  # about two minutes of CI's budget. So are the two-host runs (label multinode): the same code
  # paths as the dist suites, over TCP. And the elastic job's resize (three MPI runs of MnistCnn
  # training under the daemon: about 25 s in Release, past its 120 s limit under ASan); the daemon's
  # other tests cover its code under ASan.
  CC=clang CXX=clang++ CTEST_ARGS="-LE (cpu_levels|crash|fidelity|slurm|multinode) -E ^(dist\\.(mpi_np3|mpi_np4_pipeline|mpi_np3_small_shared_memory_slots|fault_(kill|leave|stall|ddp)_without_shared_memory)|DaemonTest\\.AnElasticJobIsResizedOneTwoOneThroughItsCheckpoint)$" \
    build_and_test build-asan asan -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_TESTS=ON -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DEMBER_SANITIZE=ON \
    -DEMBER_FUZZ=ON -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DEMBER_CPU_DISPATCH=OFF -DEMBER_CUDA=OFF \
    -DEMBER_BUILD_BENCH=OFF
fi

if [[ "${EMBER_TSAN:-1}" != 0 ]]; then
  # ThreadSanitizer on the code that runs threads, and only there (a third full build would not fit
  # CI's budget): the core and data suites (the CPU allocator and the device caching allocator
  # shared by threads, every CPU kernel's OpenMP loops, the DataLoader's workers, pinned memory),
  # interop (the TensorBoard writer's thread), dist (the communication thread, the shared-memory
  # all-reduce, failure handling: real MPI ranks) and the daemon's tests (the daemon, its clients
  # and real jobs, all instrumented; label scheduler, which includes the web endpoint's thread
  # under its tests' requests, scheduler.web_metrics and scheduler.web_dashboard), and the planted race that proves the pass sees one (label
  # tsan). LLVM's OpenMP runtime loads its Archer tool itself in an instrumented program, so
  # TSan understands its barriers; ignore_noninstrumented_modules=1 is what Archer asks for (the
  # runtime's own synchronisation is invisible to TSan). No suppressions are needed.
  # The interop.* entries are the Python readers of exported files (no threads of Ember's).
  export TSAN_OPTIONS=${TSAN_OPTIONS:-ignore_noninstrumented_modules=1:halt_on_error=1:second_deadlock_stack=1}
  CC=clang CXX=clang++ CTEST_ARGS="-L ^(core|data|interop|scheduler|dist|tsan)$ -E ^interop\\." \
    TARGETS="ember_core_tests ember_data_tests ember_interop_tests ember_dist_tests ember_dist_fault
             ember_sched_daemon_tests tsan_planted_race" \
    build_and_test build-tsan tsan -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_TESTS=ON -DCMAKE_CXX_FLAGS_RELEASE=-O1 -DEMBER_SANITIZE=thread \
    -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DEMBER_CPU_DISPATCH=OFF -DEMBER_CUDA=OFF -DEMBER_BUILD_BENCH=OFF \
    -DEMBER_BUILD_EXAMPLES=OFF
fi

wait $fidelity_pid
cat build/ctest-fidelity.log
if [[ "$(cat build/ctest-fidelity.status 2>/dev/null)" != 0 ]]; then
  echo "scripts/test.sh: the fidelity or Slurm tests failed (build/ctest-fidelity.log)"
  exit 1
fi
fidelity_total=$(sed -nE 's/.*tests failed out of ([0-9]+).*/\1/p' build/ctest-fidelity.log | tail -1)
passed=$((passed + ${fidelity_total:-0}))
skip=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' build/ctest-fidelity.log || true)
passed=$((passed - skip))
skipped=$((skipped + skip))
phase_done "fidelity+slurm (background)"

echo "scripts/test.sh: done in $((SECONDS - start)) s"
printf '  %s\n' "${times[@]}"
echo "ctest: $passed passed, 0 failed, $skipped skipped"
