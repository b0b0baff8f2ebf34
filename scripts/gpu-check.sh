#!/usr/bin/env bash
# Checks and times everything CUDA on the GPU of this machine from a bundle built elsewhere
# (scripts/gpu-bundle.sh: nothing is built here), in one command with its own budget (default
# 450 s, inside the device tool's 8 minutes for it). Steps, cheapest first, so that a broken
# machine costs seconds:
#   1. nvidia-smi: the GPU, its driver, compute capability and memory
#   2. the bundle's launcher finds every vendor library (CUDA runtime, cuBLAS, cuDNN, NCCL)
#   3. smoke: two small tests that allocate, copy and run kernels on cuda:0
#   4. op table: every row of tests/ops on cuda:0 under the native and the vendor kernels against
#      the float64 CPU reference, forward and backward, and the coverage check (every stub reached
#      on the GPU); then gpu ops: what only a GPU can check beyond it, the TF32 path, the optimizer
#      and clipping kernels (tests/gpu/gpu_ops_test.cpp, gpu_training_kernels_test.cpp)
#   5. NCCL: the communicator's tests with one rank (tests/gpu/nccl_test.cpp), where built; then
#      with two ranks on the one GPU (NCCL >= 2.30, else a SKIP line naming the version): the
#      suite, DDP with its all-reduce overlapped and not (a timed row each), and a rank killed
#      mid-step, which the other must report naming the NCCL operation it waited on
#   6. main job: the README's main job, `ember train models/mnist_cnn.pbtxt`, on cuda for two epochs
#      (the MNIST or Fashion-MNIST files of --data: scripts/gpu-bundle.sh --with-data puts them in
#      data/gpu/, carried beside the archive); then daemon: `ember sched serve --devices gpu` with
#      the real nvidia-smi, one job submitted to it (one epoch of that training, or the smoke test
#      without data), which must end done with exit 0
#   7. compute-sanitizer memcheck and racecheck on a small subset (they work under Firecracker, not
#      under gVisor: the runtime is detected and named)
#   8. bench_gpu: native kernels beside cuBLAS/cuDNN and training throughput, each rate also as a
#      fraction of the detected GPU's FP32 ceiling (ceilings_of below: NVIDIA's published figures
#      for the cards this check has met; for another card the rates are printed without fractions)
#   9. vs PyTorch: the six bench workloads, Ember's bench/step_rate and the image's PyTorch
#      (bench/torch2_ref.py) in alternating processes, fp32 and bf16, Ember with --cuda-graph,
#      torch.compile on MnistCnn (bench/gpu_vs_torch.sh; its table in OUT/gpu-vs-torch/table.md)
#  10. ncu on the native SGEMM and conv (occupancy, DRAM/L2/SM throughput); the emulator's predicted
#      sectors, wavefronts and occupancy against ncu's on the kernel report's cases; the SGEMM tile sweep,
#      whose winners it writes as OUT/tuned/sm<NN>.h (commit it as core/cuda/tuned/sm<NN>.h)
# Each step runs under `timeout` with the smaller of its own cap and what is left of the budget;
# a step that finds no budget left is reported as not run. Results: OUT/gpu-check.md (one
# Markdown table, ready for bench/RESULTS.md) and OUT/gpu-check.log (everything printed). The
# summary table is also printed last. On a machine without a GPU every step still runs and
# reports its skip (tests/scripts/gpu_check_test.sh checks this in CI).
# Usage: scripts/gpu-check.sh [--bundle DIR] [--out DIR] [--budget SECONDS] [--data DIR] [--quick]
#   --bundle PATH  the bundle: its folder, or the archive (default gpu-bundle.tar.xz, else gpu-bundle/)
#   --out DIR      where gpu-check.md and gpu-check.log go (default: $OUT when set, else gpu-check-out/)
#   --budget S     total seconds for all steps (default 450)
#   --data DIR     the four MNIST IDX files for the main job (default: data/gpu, else data/mnist,
#                  whichever holds them; none: the main job is not run)
#   --quick        fewer benchmark sizes and repetitions
#   --ceilings NAME  print the ceilings this check uses for a GPU named NAME (as nvidia-smi names
#                  it) and exit: "FP32 TFLOP/s, TF32 dense TFLOP/s, HBM TB/s, BF16 dense TFLOP/s, label",
#                  or nothing known
set -uo pipefail
# ceilings_of <nvidia-smi name>: the card's FP32 (non-tensor-core) and TF32 dense peaks, its HBM
# bandwidth and its BF16 dense tensor-core peak, from NVIDIA's data sheets (SXM parts at their
# boost clocks; the sparse figures halved), as "fp32 tf32 hbm bf16 label"; nothing for a card not
# listed (the rates are then reported without fractions).
ceilings_of() {
  case "$1" in
    *H200*NVL*) echo "60 418 4.8 835 H200_NVL" ;;
    *H200*) echo "67 495 4.8 989 H200_SXM" ;;
    *H100*PCIe*) echo "51 378 2.0 756 H100_PCIe" ;;
    *H100*NVL*) echo "60 418 3.9 835 H100_NVL" ;;
    *H100*) echo "67 495 3.35 989 H100_SXM" ;;
    *A100*) echo "19.5 156 2.0 312 A100" ;;
    *) ;;
  esac
}
if [[ ${1:-} == --ceilings ]]; then
  ceilings_of "${2:?--ceilings needs a GPU name}"
  exit 0
fi
cd "$(dirname "$0")/.." || exit 2
bundle=gpu-bundle.tar.xz out=${OUT:-gpu-check-out} budget=450 quick=() data=""
has_idx() { [[ -n $1 && ( -f $1/train-images-idx3-ubyte || -f $1/train-images-idx3-ubyte.gz ) ]]; }
[[ -f $bundle ]] || bundle="gpu-bundle"
while (($#)); do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs a directory}; shift ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    --data) data=${2:?--data needs a directory}; shift
      has_idx "$data" || { echo "gpu-check: --data $data holds no train-images-idx3-ubyte[.gz]" >&2; exit 2; } ;;
    --quick) quick=(--quick) ;;
    *) echo "gpu-check: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z $data ]]; then
  for d in data/gpu data/mnist; do has_idx "$d" && { data=$d; break; }; done
fi
[[ $budget =~ ^[0-9]+$ ]] || { echo "gpu-check: --budget expects whole seconds, got '$budget'" >&2; exit 2; }
mkdir -p "$out" || exit 2
log="$out/gpu-check.log"
md="$out/gpu-check.md"
# The archive the device tool carries (gpu-bundle.tar.xz) is unpacked first, outside the budget
# of the steps (a few seconds).
if [[ -f $bundle && $bundle == *.tar.xz ]]; then
  archive=$bundle
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  tar -xJf "$archive" -C "$unpacked" || { echo "gpu-check: cannot unpack $archive" >&2; exit 2; }
  bundle=$(find "$unpacked" -mindepth 2 -maxdepth 2 -name MANIFEST -printf '%h\n' | head -n1)
  [[ -n $bundle ]] || { echo "gpu-check: $archive holds no bundle (no MANIFEST)" >&2; exit 2; }
fi
if [[ ! -x $bundle/run || ! -f $bundle/MANIFEST ]]; then
  echo "gpu-check: no bundle at $bundle (build it with scripts/gpu-bundle.sh and carry it)" >&2
  exit 2
fi

main() {
deadline=$((SECONDS + budget))
summary=()
status=0
add() {  # add <step> <result> <seconds>
  summary+=("$(printf '| %-16s | %-70s | %5s |' "$1" "$2" "$3")")
}
fail() { status=1; }

# step_timeout <cap>: the seconds a step may take, or 0 when the budget is spent.
step_timeout() {
  local left=$((deadline - SECONDS - 5))
  ((left < 10)) && { echo 0; return; }
  echo $(($1 < left ? $1 : left))
}
# run_step <cap> <log file> <command...>: runs it with the step's timeout; returns its status (124
# for a timeout, 125 when the budget was spent before it started).
run_step() {
  local cap=$1 file=$2 t
  shift 2
  t=$(step_timeout "$cap")
  if ((t == 0)); then return 125; fi
  timeout --kill-after=5 "$t" "$@" >"$file" 2>&1
  local rc=$?
  cat "$file"
  return $rc
}
verdict() {  # verdict <rc> <file>: what a gtest program's run says
  local rc=$1 file=$2
  if ((rc == 125)); then echo "not run: budget spent"; return; fi
  if ((rc == 124 || rc == 137)); then echo "TIMED OUT (partial output in the log)"; return; fi
  if grep -q "skipped: no CUDA device" "$file"; then echo "skipped: no CUDA device"; return; fi
  local passed failed
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' "$file" | grep -oE '[0-9]+$' | tail -n1)
  failed=$(grep -cE '^\[  FAILED  \] [A-Za-z]' "$file")
  if ((rc == 0)); then echo "passed (${passed:-0} tests)"; else echo "FAILED (exit $rc, $failed failed; see the log)"; fi
}
is_fail() { [[ $1 == FAILED* || $1 == TIMED* || $1 == "not run"* ]]; }

echo "gpu-check: bundle $bundle: $(head -n1 "$bundle/MANIFEST"); budget $budget s"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- 1. the GPU
t0=$SECONDS
gpu="none" arch="" have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 &&
  q=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv,noheader 2>/dev/null) &&
  [[ -n $q ]]; then
  gpu=$(head -n1 <<<"$q" | cut -d, -f1 | xargs)
  driver=$(head -n1 <<<"$q" | cut -d, -f2 | xargs)
  arch=$(head -n1 <<<"$q" | cut -d, -f3 | tr -d ' .')
  mem=$(head -n1 <<<"$q" | cut -d, -f4 | xargs)
  have_gpu=1
  add "nvidia-smi" "$gpu, sm_$arch, driver $driver, $mem" $((SECONDS - t0))
else
  add "nvidia-smi" "no GPU found (nvidia-smi absent or reports none)" $((SECONDS - t0))
fi
kernel=$(uname -r)
if [[ $kernel == 4.4.0* ]] || grep -qi gvisor <<<"$(dmesg 2>/dev/null)"; then  # not a pipe: pipefail
  runtime="gVisor (kernel $kernel)"
elif [[ $kernel == *-fc-* ]]; then
  runtime="Firecracker (kernel $kernel)"
else
  runtime="unknown (kernel $kernel)"
fi
echo "gpu-check: $gpu${arch:+ (sm_$arch)}; runtime $runtime"

# ---------------------------------------------------------------- 2. vendor libraries
t0=$SECONDS
if "$bundle/run" --check >"$tmp/libs" 2>&1; then
  add "vendor libraries" "all found ($(wc -l <"$bundle/vendor-libs") sonames)" $((SECONDS - t0))
  cat "$tmp/libs"
  libs_ok=1
else
  cat "$tmp/libs"
  add "vendor libraries" "MISSING: $(grep -oE 'lacks .*' "$tmp/libs" | head -n1)" $((SECONDS - t0))
  libs_ok=0
  fail
fi

# ---------------------------------------------------------------- 3-5. tests
gtest_step() {  # gtest_step <name> <cap> <program> [args...]
  local name=$1 cap=$2
  shift 2
  local t0=$SECONDS file="$tmp/$name.out" rc v
  if ((!libs_ok)); then
    add "$name" "not run: vendor libraries missing" 0
    return 1
  fi
  echo "---- $name: $*"
  run_step "$cap" "$file" "$bundle/run" "$@"
  rc=$?
  v=$(verdict $rc "$file")
  # A GPU that nvidia-smi sees but CUDA does not is a broken machine, not a skip.
  if ((have_gpu)) && [[ $v == skipped* ]]; then v="FAILED: nvidia-smi sees a GPU, CUDA reports none"; fi
  add "$name" "$v" $((SECONDS - t0))
  if is_fail "$v"; then fail; return 1; fi
  return 0
}
# ---------------------------------------------------------------- 5b. two NCCL ranks on the one GPU
# Two ranks of ember_gpu_nccl_tests share the GPU under NCCL's opt-in (NCCL_MULTI_RANK_GPU_ENABLE=1,
# NCCL >= 2.30: the version is read from the library the program loads, and an older one is a
# SKIP naming it). The device image has no OpenMPI: the ranks meet through a folder
# (tests/gpu/file_bootstrap.h). The suite: every collective, the communicator contract the MPI
# suites run (grouped exchanges, order, ncclCommSplit), a 2-stage pipeline under both schedules,
# DDP of the MNIST CNN and of the LSTM LM, each against one process. Then, if it passed, DDP
# steps timed with the bucketed all-reduce overlapped with backward and without. NCCL_MAX_CTAS
# bounds each rank's channels (two ranks short of SMs hang, says NCCL).
# two_ranks <cap> <output prefix> [args...]: both ranks' exit statuses in rc0 and rc1.
two_ranks() {
  local cap=$1 prefix=$2 t rv r pids=()
  shift 2
  t=$(step_timeout "$cap")
  if ((t == 0)); then rc0=125 rc1=125; return; fi
  rv=$(mktemp -d "$tmp/rendezvous.XXXX")
  for r in 0 1; do
    NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=${NCCL_MAX_CTAS:-8} EMBER_TEST_RENDEZVOUS=$rv EMBER_TEST_RANK=$r \
      EMBER_TEST_WORLD_SIZE=2 timeout --kill-after=5 "$t" "$bundle/run" ember_gpu_nccl_tests "$@" >"$prefix.$r" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"
  rc0=$?
  wait "${pids[1]}"
  rc1=$?
  cat "$prefix.0"
  sed 's/^/[rank 1] /' "$prefix.1"
}
nccl_two_ranks() {
  local name="nccl (2 ranks)" t0=$SECONDS ver code wheel v short rc0 rc1
  if ((!have_gpu)); then
    add "$name" "skipped: no CUDA device" 0
    return 0
  fi
  ver=$("$bundle/run" ember_gpu_nccl_tests --nccl-version 2>&1)
  ver=$(grep -m1 -E '^nccl [0-9]' <<<"$ver" || head -n1 <<<"$ver")
  code=$(grep -oE '\([0-9]+\)' <<<"$ver" | tr -d '()' | tail -n1)
  short=${ver#nccl }
  short=${short%% (*}
  wheel=$(timeout 20 python3 -c 'import importlib.metadata as m; print(m.version("nvidia-nccl-cu13"))' 2>/dev/null)
  echo "---- $name: the program loads ${ver:-no NCCL}; nvidia-nccl-cu13 wheel ${wheel:-not installed}"
  if [[ -z $code ]]; then
    add "$name" "FAILED: cannot read the NCCL version ($(head -n1 <<<"$ver"))" $((SECONDS - t0))
    fail
    return 1
  fi
  if ((code < 23000)); then
    echo "SKIP $name: NCCL $short (wheel nvidia-nccl-cu13 ${wheel:-none}) predates 2.30, which ranks sharing a GPU need"
    add "$name" "SKIP: NCCL $short loaded (wheel ${wheel:-none}); sharing a GPU needs >= 2.30" $((SECONDS - t0))
    return 0
  fi
  two_ranks 150 "$tmp/nccl2"
  v=$(verdict $rc0 "$tmp/nccl2.0")
  if ((rc1 != 0)) && ! is_fail "$v"; then v="FAILED (rank 1 exit $rc1; see the log)"; fi
  add "$name" "$v, NCCL $short, NCCL_MAX_CTAS=${NCCL_MAX_CTAS:-8}" $((SECONDS - t0))
  if is_fail "$v"; then fail; return 1; fi
  t0=$SECONDS
  echo "---- ddp overlap (2 ranks)"
  two_ranks 60 "$tmp/overlap" --ddp-overlap
  if ((rc0 == 0 && rc1 == 0)); then
    add "ddp overlap" "$(sed -nE 's/^ddp overlap: +([a-z ]+[a-z]) +([0-9.]+ ms).*/\1 \2/p' "$tmp/overlap.0" | paste -sd';' - | sed 's/;/; /g') per step" \
      $((SECONDS - t0))
  else
    add "ddp overlap" "FAILED (exit $rc0/$rc1; see the log)" $((SECONDS - t0))
    fail
  fi
  # Rank 1 killed mid-step: rank 0's watchdog (dist/device_watchdog.h) must end it within its
  # timeout, exit status 76, naming the gradient bucket it waited on.
  t0=$SECONDS
  echo "---- nccl rank killed mid-step (2 ranks)"
  EMBER_NCCL_TIMEOUT_SECONDS=10 two_ranks 45 "$tmp/kill" --ddp-kill
  if ((rc0 == 76)) && grep -q "rank 0 of 2 (NCCL): an operation has not completed" "$tmp/kill.0" &&
    grep -q "this rank was waiting on NCCL #[0-9]* all_reduce .*'bucket [0-9]* of step 3'" "$tmp/kill.0"; then
    add "nccl rank killed" "rank 0 ended by the watchdog (status 76, the bucket named) after rank 1 died" \
      $((SECONDS - t0))
  else
    add "nccl rank killed" "FAILED (rank 0 exit $rc0, rank 1 exit $rc1; see the log)" $((SECONDS - t0))
    fail
  fi
  return 0
}
smoke_ok=0
gtest_step smoke 60 ember_gpu_tests \
  "--gtest_filter=GpuRuntime.RoundTripsEveryDtypeThroughTheDevice:GpuRuntime.CastsEveryDtypePairOnTheDevice" && smoke_ok=1
if ((smoke_ok)); then
  gtest_step "op table" 150 ember_ops_tests --group=cuda
  gtest_step "gpu ops" 150 ember_gpu_tests
  if [[ -x $bundle/bin/ember_gpu_nccl_tests ]]; then
    gtest_step "nccl (1 rank)" 60 ember_gpu_nccl_tests
    nccl_two_ranks
  else
    add "nccl (1 rank)" "not in the bundle (built without NCCL or MPI)" 0
  fi
else
  add "op table" "not run: the smoke test failed" 0
  add "gpu ops" "not run: the smoke test failed" 0
fi

# ---------------------------------------------------------------- 6. main job, daemon
t0=$SECONDS
if ((!have_gpu || !smoke_ok)); then
  add "main job" "not run: no working GPU" 0
  add "daemon" "not run: no working GPU" 0
else
  train=("$bundle/run" ember train models/mnist_cnn.pbtxt --data "$data" --device cuda)
  if [[ -z $data ]]; then
    add "main job" "not run: no MNIST files (scripts/gpu-bundle.sh --with-data, carry data/gpu)" 0
  else
    echo "---- main job: ${train[*]} --epochs 2"
    run_step 120 "$tmp/main.out" "${train[@]}" --epochs 2 --checkpoint-dir "$tmp/main" --overwrite
    rc=$?
    acc=$(awk -F, 'NR > 1 {a = $6} END {print a}' "$tmp/main/metrics.csv" 2>/dev/null)
    rate=$(grep -oE '[0-9]+ samples/s' "$tmp/main.out" | tail -n1)
    if ((rc == 0)) && [[ -n $acc ]]; then
      add "main job" "passed: $data, 2 epochs, test accuracy $acc, $rate" $((SECONDS - t0))
    else
      add "main job" "FAILED (exit $rc; see the log)" $((SECONDS - t0))
      fail
    fi
  fi
  # The daemon on the real GPUs: its pool from nvidia-smi, one job given the device.
  t0=$SECONDS
  if [[ -n $data ]]; then
    job=("${train[@]}" --epochs 1 --limit 20000 --checkpoint-dir "$tmp/job" --overwrite)
  else
    job=("$bundle/run" ember_gpu_tests "--gtest_filter=GpuRuntime.RoundTripsEveryDtypeThroughTheDevice")
  fi
  state="$tmp/sched" cap=$(step_timeout 90) line="" stuck=0
  if ((cap == 0)); then
    line="not run: budget spent"
  else
    # Every client call and the daemon's own exit are bounded: a daemon that does not start, or
    # does not stop, costs this step's cap and no more.
    sched() { timeout 20 "$bundle/run" ember sched "$1" --state "$state" "${@:2}"; }
    end=$((SECONDS + cap))
    "$bundle/run" ember sched serve --state "$state" --devices gpu --quiet >"$tmp/serve.out" 2>&1 &
    serve_pid=$!
    for _ in $(seq 100); do sched status >/dev/null 2>&1 && break; sleep 0.2; done
    echo "---- daemon: submit ${job[*]}"
    sched status 2>&1 | head -n1
    sched submit --name gpu-check --devices 1 -- "${job[@]}" 2>&1
    while ((SECONDS < end)); do
      line=$(sched status --all 2>/dev/null | awk '$2 == "gpu-check"')
      [[ $line =~ (done|failed|cancelled) ]] && break
      sleep 1
    done
    echo "$line"
    sched logs --job 1 2>&1 | tail -n 3
    sched drain --preempt >/dev/null 2>&1
    for _ in $(seq 100); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$serve_pid" 2>/dev/null && stuck=1 line="$line; the daemon did not exit after drain"
    wait "$serve_pid" 2>/dev/null
  fi
  if ((!stuck)) && [[ $line =~ done.*exit\ 0 ]]; then
    add "daemon" "passed: --devices gpu, one job done (exit 0) on the GPU" $((SECONDS - t0))
  else
    add "daemon" "FAILED (${line:-no job line}; see the log)" $((SECONDS - t0))
    fail
  fi
fi

# ---------------------------------------------------------------- 7. compute-sanitizer
t0=$SECONDS
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
subset="Ops_cuda_native.sum*:Ops_cuda_native.softmax*:Ops_cuda_native.sort_dim1:Ops_cuda_native.gather"
if ((!have_gpu || !smoke_ok)); then
  add "compute-sanitizer" "not run: no working GPU" 0
elif [[ -z $sanitizer ]]; then
  add "compute-sanitizer" "not run: compute-sanitizer not found" 0
elif [[ $runtime == gVisor* ]]; then
  add "compute-sanitizer" "not run: $runtime refuses it (works under Firecracker)" 0
else
  for tool in memcheck racecheck; do
    t0=$SECONDS
    echo "---- compute-sanitizer --tool $tool"
    run_step 60 "$tmp/$tool.out" "$sanitizer" --tool "$tool" --error-exitcode 99 \
      "$bundle/run" ember_ops_tests --group=cuda "--gtest_filter=$subset"
    rc=$?
    if ((rc == 0)); then
      add "$tool" "no errors ($(grep -oE '\[  PASSED  \] [0-9]+' "$tmp/$tool.out" | grep -oE '[0-9]+$' | tail -n1) tests, $runtime)" $((SECONDS - t0))
    elif ((rc == 125)); then
      add "$tool" "not run: budget spent" 0
      fail
    else
      add "$tool" "FAILED (exit $rc: $(grep -m1 -oE '(Invalid|Race|Error)[^.]*' "$tmp/$tool.out" || echo 'see the log'))" $((SECONDS - t0))
      fail
    fi
  done
fi

# ---------------------------------------------------------------- 8. benchmarks
t0=$SECONDS
if ((libs_ok)); then
  echo "---- bench_gpu"
  run_step 150 "$tmp/bench.out" "$bundle/run" bench_gpu "${quick[@]}" >/dev/null
  rc=$?
  # Each TFLOP/s figure also as a fraction of this GPU's FP32 (non-tensor-core) ceiling, or of its
  # 16-bit tensor-core ceiling on the bf16 and fp16 rows (the same dense peak for both on Hopper and Ampere).
  read -r fp32_peak _ _ bf16_peak _ <<<"$(ceilings_of "$gpu")"
  awk -v fp32="${fp32_peak:-0}" -v bf16="${bf16_peak:-0}" '{
    line = $0
    peak = line ~ /^\| *(bf16|fp16)/ ? bf16 : fp32
    what = line ~ /^\| *(bf16|fp16)/ ? "BF16/FP16 dense peak" : "FP32 peak"
    while (match(line, /\([0-9.]+ TFLOP\/s\)/)) {
      v = substr(line, RSTART + 1, RLENGTH - 10) + 0
      if (peak > 0) printf "%s(%s TFLOP/s, %.0f%% of %s)", substr(line, 1, RSTART - 1), v, 100 * v / peak, what
      else printf "%s(%s TFLOP/s)", substr(line, 1, RSTART - 1), v
      line = substr(line, RSTART + RLENGTH)
    }
    print line
  }' "$tmp/bench.out" >"$tmp/bench.md"
  cat "$tmp/bench.md"
  if ((rc == 125)); then
    add "bench_gpu" "not run: budget spent" 0
    fail
  elif grep -q "skipped: no CUDA device" "$tmp/bench.out"; then
    add "bench_gpu" "skipped: no CUDA device" $((SECONDS - t0))
  elif ((rc == 0)); then
    add "bench_gpu" "ok (tables below)" $((SECONDS - t0))
  elif ((rc == 124 || rc == 137)); then
    add "bench_gpu" "TIMED OUT (partial tables below)" $((SECONDS - t0))
    fail
  else
    add "bench_gpu" "FAILED (exit $rc)" $((SECONDS - t0))
    fail
  fi
else
  add "bench_gpu" "not run: vendor libraries missing" 0
fi

# ---------------------------------------------------------------- 9. Ember beside PyTorch
# bench/gpu_vs_torch.sh with the bundle's step_rate and the image's python3 (its torch): alternating
# processes, medians over rounds; the budget below covers its rounds and torch.compile's run.
vs_torch_step() {
  local t0=$SECONDS cap rc=0
  if ((!have_gpu || !smoke_ok)); then
    add "vs PyTorch" "not run: no working GPU" 0
    return
  fi
  if ! python3 -c 'import torch' >/dev/null 2>&1; then
    add "vs PyTorch" "not run: python3 here has no torch" 0
    return
  fi
  cap=$(step_timeout 95)
  if ((cap < 30)); then
    add "vs PyTorch" "not run: budget spent" 0
    fail
    return
  fi
  echo "---- vs PyTorch: bench/gpu_vs_torch.sh, $cap s"
  timeout --kill-after=5 $((cap + 10)) bash bench/gpu_vs_torch.sh --out "$out/gpu-vs-torch" --device cuda \
    --budget "$cap" --rounds 3 --reps 2 --run-seconds 0.15 --compile-timeout 25 --compile-workloads mnist_cnn \
    -- "$bundle/run" step_rate >"$tmp/vs-torch.out" 2>&1 || rc=$?
  cat "$tmp/vs-torch.out"
  if ((rc == 0)) && [[ -s $out/gpu-vs-torch/table.md ]]; then
    cp "$out/gpu-vs-torch/table.md" "$tmp/vs-torch.md"
    add "vs PyTorch" "ok (table below; $(grep -oE 'median of [0-9]+' "$tmp/vs-torch.md" | head -n1) rounds)" $((SECONDS - t0))
  else
    add "vs PyTorch" "FAILED (exit $rc; see the log)" $((SECONDS - t0))
    fail
  fi
}
vs_torch_step

# ---------------------------------------------------------------- 10. kernel counters, tile sweep (issue 50)
# Nsight Compute on the native SGEMM (4096^3) and conv (ResNet 3x3 forward), one launch each
# (bench_gpu --ncu): achieved occupancy, DRAM and L2 throughput, SM throughput, to set beside the
# emulator's report (docs/cuda/kernel-report.md). Then the autotune sweep of the SGEMM's tile
# configurations (bench_gpu --tiles: each tile timed beside cuBLAS, the winner per shape printed and
# written as OUT/tuned/sm<NN>.h, the table to commit as core/cuda/tuned/sm<NN>.h: core/cuda/gemm_tuning.h).
ncu_metrics=sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed
ncu_metrics+=,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
# emulator_vs_ncu <ncu>: the kernel report's cases run once on the GPU under ncu (every launch,
# the counters of tests/emu_profile/ncu_compare.h), ncu's CSV kept as OUT/ncu/kernel-report.csv,
# then the same cases in the emulator beside it (ember_kernel_report --compare-ncu, with the
# bundle's ptxas logs for occupancy): sectors and wavefronts per request and occupancy, each
# within 10% of ncu's or not. It can be rerun on the CSV anywhere: build/tests/ember_kernel_report
# --compare-ncu FILE.
emulator_vs_ncu() {
  local ncu_bin=$1 t0=$SECONDS rc csv="$out/ncu/kernel-report.csv" verdict
  if [[ ! -x $bundle/bin/ember_kernel_report ]]; then
    add "emulator vs ncu" "skipped: the bundle has no ember_kernel_report" 0
    return
  fi
  echo "---- ncu on the kernel report's cases"
  mkdir -p "$out/ncu"
  run_step 150 "$csv" "$ncu_bin" --target-processes all --csv \
    --metrics "$("$bundle/run" ember_kernel_report --ncu-metrics)" "$bundle/run" ember_kernel_report --on-gpu >/dev/null
  rc=$?
  grep -E "==PROF==|==ERROR==|ran on" "$csv" || true
  if ((rc != 0)); then
    add "emulator vs ncu" "FAILED: ncu exit $rc (OUT/ncu/kernel-report.csv)" $((SECONDS - t0))
    fail
    return
  fi
  echo "---- emulator vs ncu"
  run_step 90 "$tmp/emu-vs-ncu.out" "$bundle/run" ember_kernel_report --compare-ncu "$csv" --ptxas "$bundle/ptxas"
  rc=$?
  verdict=$(sed -n 's/^emulator vs ncu: //p' "$tmp/emu-vs-ncu.out")
  if ((rc == 0 || rc == 1)) && [[ -n $verdict ]]; then
    add "emulator vs ncu" "$verdict (table in the log)" $((SECONDS - t0))
  else
    add "emulator vs ncu" "FAILED (exit $rc)" $((SECONDS - t0))
    fail
  fi
}
kernel_tuning_step() {
  local t0=$SECONDS rc kernel ncu_bin
  ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  if [[ -z $ncu_bin ]]; then
    add "ncu kernels" "skipped: ncu not found" 0
  else
    for kernel in sgemm_warptile implicit_gemm; do
      echo "---- ncu $kernel"
      run_step 90 "$tmp/ncu-$kernel.out" "$ncu_bin" --target-processes all --kernel-name "regex:$kernel" \
        --launch-skip 1 --launch-count 1 --metrics "$ncu_metrics" "$bundle/run" bench_gpu --ncu >/dev/null
      rc=$?
      grep -E "$kernel|sm__|dram__|lts__|==PROF==|==ERROR==" "$tmp/ncu-$kernel.out" || true
      if ((rc == 0)); then add "ncu $kernel" "ok (metrics above in the log)" $((SECONDS - t0))
      else add "ncu $kernel" "FAILED (exit $rc)" $((SECONDS - t0)); fail; fi
    done
    emulator_vs_ncu "$ncu_bin"
  fi
  t0=$SECONDS
  echo "---- sgemm tile sweep"
  mkdir -p "$out/tuned"
  run_step 120 "$tmp/tiles.out" "$bundle/run" bench_gpu --tiles --write-tuned "$out/tuned" >/dev/null
  rc=$?
  cat "$tmp/tiles.out"
  if grep -q "skipped: no CUDA device" "$tmp/tiles.out"; then
    add "sgemm tiles" "skipped: no CUDA device" $((SECONDS - t0))
  elif ((rc == 0)); then
    add "sgemm tiles" "$(grep -c '^tile winner' "$tmp/tiles.out") winners; $(sed -n 's|^tuned table written: .*/||p' "$tmp/tiles.out" | cut -d' ' -f1) to commit as core/cuda/tuned/" $((SECONDS - t0))
  else
    add "sgemm tiles" "FAILED (exit $rc)" $((SECONDS - t0))
    fail
  fi
}
if ((libs_ok)); then kernel_tuning_step; else add "ncu, sgemm tiles" "not run: vendor libraries missing" 0; fi

# ---------------------------------------------------------------- summary (last)
{
  echo "### GPU check: ${gpu}${arch:+ (sm_$arch)}, $(date -u +%Y-%m-%d)"
  echo
  echo "Bundle: $(head -n1 "$bundle/MANIFEST"); runtime $runtime; $((SECONDS)) s of a $budget s budget."
  read -r c_fp32 c_tf32 c_hbm c_bf16 c_label <<<"$(ceilings_of "$gpu")"
  if [[ -n ${c_fp32:-} ]]; then
    echo "Ceilings (${c_label//_/ }): FP32 ~$c_fp32 TFLOP/s, TF32 dense ~$c_tf32 TFLOP/s, BF16 dense ~$c_bf16 TFLOP/s, HBM ~$c_hbm TB/s."
  else
    echo "Ceilings: none known for '$gpu' (rates are printed without fractions of a peak)."
  fi
  echo
  printf '| %-16s | %-70s | %5s |\n' step result "s"
  printf '| %s | %s | %s |\n' "$(printf -- '-%.0s' {1..16})" "$(printf -- '-%.0s' {1..70})" "-----"
  printf '%s\n' "${summary[@]}"
  if [[ -s $tmp/bench.md ]] && ! grep -q "skipped: no CUDA device" "$tmp/bench.md"; then
    echo
    echo '```'
    cat "$tmp/bench.md"
    echo '```'
  fi
  if [[ -s $tmp/vs-torch.md ]]; then
    echo
    cat "$tmp/vs-torch.md"
  fi
} >"$md"
echo
echo "gpu-check summary (also in $md; everything in $log):"
printf '| %-16s | %-70s | %5s |\n' step result "s"
printf '%s\n' "${summary[@]}"
return $status
}

# Everything printed also goes to the log; the pipe ends before the script does, so the log is
# whole when the device tool collects it.
main 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
