#!/usr/bin/env bash
# Checks and times everything CUDA on the GPU of this machine, in one go (budget: 8 minutes on
# one H200): builds Ember with CUDA for the GPU it finds (nvidia-smi's compute capability), runs
# the `gpu` ctest label (every CUDA op, native and vendor kernels, against the CPU, forward and
# backward; the NCCL communicator and data-parallel training on the GPU, under mpirun, where MPI
# and NCCL were found) and bench/gpu (native SGEMM vs cuBLAS, conv vs cuDNN, LSTM vs cuDNN RNN, training
# samples/s, launches per step), then prints a summary table last. On a machine without a GPU it
# still runs to its end: it builds (CPU-only when there is no nvcc either), and the tests and
# the benchmark report that they were skipped.
# Usage: scripts/gpu-check.sh [--build-dir DIR] [--skip-build] [--quick]
#   --build-dir DIR  build tree to use (default build-gpu/)
#   --skip-build     use DIR as it is (it must hold the ember_gpu_checks targets and bench/gpu)
#   --quick          fewer benchmark sizes and repetitions
# Environment: GPU_CHECK_JOBS (build jobs, default: all cores).
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-gpu skip_build=0 quick=()
while (($#)); do
  case "$1" in
    --build-dir) build=${2:?--build-dir needs a directory}; shift ;;
    --skip-build) skip_build=1 ;;
    --quick) quick=(--quick) ;;
    *) echo "gpu-check: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
jobs=${GPU_CHECK_JOBS:-$(nproc)}
summary=()
status=0
add() {  # add <step> <result> <seconds>
  summary+=("$(printf '| %-22s | %-52s | %5s s |' "$1" "$2" "$3")")
}

# ---------------------------------------------------------------- the GPU
gpu="none" arch=""
if command -v nvidia-smi >/dev/null 2>&1; then
  if q=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null) && [[ -n "$q" ]]; then
    gpu=$(head -n1 <<<"$q" | cut -d, -f1 | xargs)
    arch=$(head -n1 <<<"$q" | cut -d, -f2 | tr -d ' .')
  fi
fi
if [[ -n "$arch" ]]; then
  echo "gpu-check: $gpu (sm_$arch)"
else
  echo "gpu-check: no GPU found (nvidia-smi absent or reports none): tests and benchmarks will report skips"
fi

# ---------------------------------------------------------------- build
t0=$SECONDS
if ((skip_build)); then
  add "build" "skipped (--skip-build, $build)" 0
else
  cuda=OFF
  if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then cuda=ON; fi
  args=(-DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=$cuda -DEMBER_BUILD_EXAMPLES=OFF)
  [[ -n "$arch" && $cuda == ON ]] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  if cmake -S . -B "$build" "${gen[@]}" "${args[@]}" >"$build.configure.log" 2>&1 &&
     cmake --build "$build" -j "$jobs" --target ember_gpu_checks bench_gpu >"$build.build.log" 2>&1; then
    add "build" "ok (EMBER_CUDA=$cuda${arch:+, sm_$arch})" $((SECONDS - t0))
  else
    add "build" "FAILED (see $build.configure.log / $build.build.log)" $((SECONDS - t0))
    tail -n 30 "$build.build.log" 2>/dev/null || tail -n 30 "$build.configure.log"
    status=1
  fi
fi

# ---------------------------------------------------------------- gpu test label
t0=$SECONDS
if ((status == 0)); then
  log=$(mktemp)
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300 >"$log" 2>&1
  rc=$?
  cat "$log"
  counts=$(grep -E "tests passed|tests failed" "$log" | tail -n1)
  # A test may skip on a GPU machine too (gpu.nccl_np2 needs two GPUs on the node): the label
  # counts as skipped only when every test of it skipped.
  skipped=$(grep -cE "^[[:space:]]*[0-9]+ - .*\(Skipped\)" "$log")
  total=$(grep -oE "out of [0-9]+" "$log" | tail -n1 | grep -oE "[0-9]+")
  if ((rc != 0)); then
    # ctest's own verdicts: a failure on an MPI rank other than 0 prints no gtest line there.
    failed=$(grep -cE "\*\*\*(Failed|Timeout|Exception)" "$log")
    add "ctest -L gpu" "FAILED ($failed tests; output above)" $((SECONDS - t0))
    status=1
  elif [[ -n "$total" ]] && ((skipped == total)); then
    add "ctest -L gpu" "skipped: no CUDA device" $((SECONDS - t0))
  else
    add "ctest -L gpu" "passed ($counts, $skipped skipped)" $((SECONDS - t0))
  fi
  rm -f "$log"
else
  add "ctest -L gpu" "not run (no build)" 0
fi

# ---------------------------------------------------------------- bench/gpu
t0=$SECONDS
bench="$build/bench/gpu"
if [[ -x "$bench" ]]; then
  out=$(mktemp)
  timeout 240 "$bench" "${quick[@]}" >"$out" 2>&1
  rc=$?
  cat "$out"
  if grep -q "skipped: no CUDA device" "$out"; then
    add "bench/gpu" "skipped: no CUDA device (n/a rows above)" $((SECONDS - t0))
  elif ((rc == 0)); then
    add "bench/gpu" "ok (tables above)" $((SECONDS - t0))
  elif ((rc == 124)); then
    add "bench/gpu" "TIMED OUT after 240 s (partial output above)" $((SECONDS - t0))
    status=1
  else
    add "bench/gpu" "FAILED (exit $rc)" $((SECONDS - t0))
    status=1
  fi
  rm -f "$out"
else
  add "bench/gpu" "not run ($bench missing)" 0
  status=1
fi

# ---------------------------------------------------------------- summary (last)
echo
echo "gpu-check summary: GPU ${gpu}${arch:+ (sm_$arch)}"
printf '| %-22s | %-52s | %7s |\n' step result time
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..24})" "$(printf -- '-%.0s' {1..54})" "$(printf -- '-%.0s' {1..9})"
printf '%s\n' "${summary[@]}"
exit $status
