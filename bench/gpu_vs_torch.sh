#!/usr/bin/env bash
# Ember beside PyTorch on one device, in alternating processes: per round, bench/step_rate (Ember)
# and bench/torch2_ref.py (PyTorch eager) in fp32, then both in bf16 autocast, then Ember with
# --cuda-graph, each process timing every workload; after the rounds, PyTorch's torch.compile once
# (fp32, on --compile-workloads) under its own timeout, which is kept out of the rounds' budget. bench/gpu_vs_torch_table.py turns the lines into the table (medians
# over rounds, their spread, the ratios). scripts/gpu-check.sh runs it on the lent GPU; CI runs it on
# the CPU with small counts (tests/scripts/gpu_vs_torch_test.sh).
#   bench/gpu_vs_torch.sh --out DIR [--device cuda|cpu] [--python PY] [--rounds N] [--budget S]
#       [--workloads W,...] [--reps N] [--run-seconds S] [--compile-timeout S] [--compile-workloads W,...]
#       -- STEP_RATE_COMMAND...
# STEP_RATE_COMMAND runs bench/step_rate (the GPU bundle's `run step_rate`, or build/bench/step_rate).
# --python: the interpreter with torch (none: PyTorch's columns say so). Writes DIR/raw.txt (every
# line, tagged "<round> <engine> <config>") and DIR/table.md; prints the table. Stops starting
# processes when the budget is spent (each runs under the time left); the table says how many
# rounds ran.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="" device=cuda python=python3 rounds=3 budget=90 reps=2 run_seconds=0.15 compile_timeout=40
workloads=mnist_cnn,mlp_gan,dcgan,lstm_lm,lstm_classifier,bilstm compile_workloads=""
die() { echo "gpu_vs_torch.sh: $*" >&2; exit 2; }
while (($#)); do
  case "$1" in
    --out) out=${2:?}; shift ;;
    --device) device=${2:?}; shift ;;
    --python) python=${2:?}; shift ;;
    --rounds) rounds=${2:?}; shift ;;
    --budget) budget=${2:?}; shift ;;
    --workloads) workloads=${2:?}; shift ;;
    --reps) reps=${2:?}; shift ;;
    --run-seconds) run_seconds=${2:?}; shift ;;
    --compile-timeout) compile_timeout=${2:?}; shift ;;
    --compile-workloads) compile_workloads=${2:?}; shift ;;
    --) shift; break ;;
    *) die "unknown argument '$1' (see the header of $0)" ;;
  esac
  shift
done
(($#)) || die "no step_rate command after --"
[[ -n $out ]] || die "--out DIR is required"
[[ $device == cuda || $device == cpu ]] || die "--device must be cuda or cpu, got '$device'"
for n in "$rounds" "$budget" "$reps" "$compile_timeout"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "--rounds, --budget, --reps and --compile-timeout take whole numbers >= 1, got '$n'"
done
step_rate=("$@")
compile_workloads=${compile_workloads:-$workloads}
mkdir -p "$out"
raw=$out/raw.txt
: >"$raw"
have_torch=0
if [[ $python != none ]] && "$python" -c 'import torch' >/dev/null 2>&1; then have_torch=1; fi
end=$((SECONDS + budget))
deadline=$((end - (have_torch ? compile_timeout : 0)))  # the rounds'; the compile run has the rest
# The workloads Ember captures (the GANs draw noise in their step: bench/ember_steps.h).
graph_workloads=$(tr ',' '\n' <<<"$workloads" | grep -vE '^(mlp_gan|dcgan)$' | paste -sd, || true)

# run <round> <engine> <config> <command...>: tags each workload line; a failure leaves a note.
run() {
  local round=$1 engine=$2 config=$3 left=$((deadline - SECONDS)) rc=0
  shift 3
  if ((left < 2)); then
    echo "# $round $engine $config failed: budget spent" >>"$raw"
    return 1
  fi
  timeout --kill-after=3 "$left" "$@" >"$out/stdout" 2>"$out/stderr" || rc=$?
  awk -v tag="$round $engine $config" 'NF == 7 {print tag, $0}' "$out/stdout" >>"$raw"
  grep -E '^# compile ' "$out/stderr" | sed "s/^# compile /# $round $engine $config compile /" >>"$raw" || true
  if ((rc != 0)); then
    local why
    why=$(grep -vE '^# (torch|compile) ' "$out/stderr" | tail -n1 | tr -s ' ' | cut -c1-300 || true)
    ((rc == 124 || rc == 137)) && why="timed out after ${left} s"
    echo "# $round $engine $config failed: ${why:-exit $rc}" >>"$raw"
  fi
  return 0
}
common=(--workload "$workloads" --reps "$reps" --run-seconds "$run_seconds")
torch_cmd=("$python" "$here/torch2_ref.py" --device "$device" --any-version)
done_rounds=0
for ((r = 1; r <= rounds; r++)); do
  run "$r" ember fp32 "${step_rate[@]}" --device "$device" "${common[@]}" || break
  ((have_torch)) && { run "$r" torch fp32 "${torch_cmd[@]}" "${common[@]}" || break; }
  run "$r" ember bf16 "${step_rate[@]}" --device "$device" --precision bf16 "${common[@]}" || break
  ((have_torch)) && { run "$r" torch bf16 "${torch_cmd[@]}" --precision bf16 "${common[@]}" || break; }
  if [[ -n $graph_workloads ]]; then
    run "$r" ember graph "${step_rate[@]}" --device "$device" --cuda-graph --workload "$graph_workloads" \
      --reps "$reps" --run-seconds "$run_seconds" || break
  fi
  done_rounds=$r
done
if ((have_torch)); then
  deadline=$((SECONDS + compile_timeout < end ? SECONDS + compile_timeout : end))
  run 1 torch compile "${torch_cmd[@]}" --compile --workload "$compile_workloads" --reps "$reps" \
    --run-seconds "$run_seconds" || true
else
  echo "# 1 torch compile failed: no torch" >>"$raw"
fi
torch_version=$( ((have_torch)) && "$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
python3 "$here/gpu_vs_torch_table.py" "$raw" --device "$device" --rounds "$done_rounds" --torch "$torch_version" \
  >"$out/table.md.tmp"
mv "$out/table.md.tmp" "$out/table.md"
rm -f "$out/stdout" "$out/stderr"
cat "$out/table.md"
