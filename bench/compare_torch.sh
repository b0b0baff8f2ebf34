#!/usr/bin/env bash
# Ember against what users run, on the training workloads of bench/workloads.h, each engine in a
# process of its own, alternating: every round runs, for each workload and thread count T,
# bench/step_rate (Ember at T threads), and at every thread count t <= T (each side the way a
# careful user runs it: its best setting up to T, OpenMP and BLAS threads matched):
# - bench/torch_ref, libtorch 1.13 (Debian's, on Debian's OpenBLAS), with OPENBLAS_CORETYPE set to
#   the kernel family Ember runs (`ember info`'s "blas kernels"), so both use the same GEMM kernels;
# - bench/torch2_ref.py, PyTorch 2.x from PyPI (bench/setup_torch.sh pins and installs it into
#   bench/.venv-torch), eager, and again with torch.compile on the models (a fresh Inductor cache
#   each process, so its compile time is a cold one; capped at --compile-timeout seconds).
# Each process times 3 runs after a warm-up (bench/step_rate_main.h). The table gives the median
# over rounds of those medians and the min-max over rounds; each ratio (> 1: Ember is faster) is the
# median of the per-round ratios, the spread over rounds in brackets. GFLOP/s: nominal (workloads.h)
# and executed (bench/flops.h: input gradients autograd skips left out, Winograd's transforms and
# reduced multiplies as run); "of SGEMM" divides the executed rate by the machine's SGEMM rate at
# the same thread count (bench/sgemm_rate, OpenBLAS, measured every round), per round. "PyTorch of
# SGEMM" is the same for PyTorch 2.x eager (at Ember's executed FLOP count), and "ceiling" the ratio
# against PyTorch 2.x that an engine running every executed FLOP at the SGEMM rate would reach: where
# it is below a target ratio, no float32 engine on this machine's SGEMM can meet that target.
# With --batch 16,64,256 every workload runs at each batch size; without it, at its own batch.
# With --precision bf16 it compares mixed precision instead (issue 51): per round, workload and T,
# Ember fp32 and bf16 (step_rate --precision bf16, autocast) at T threads and PyTorch 2.x fp32 and
# bf16 (torch.autocast('cpu', torch.bfloat16)) at every t <= T, each at its best; no libtorch 1.13
# (its autocast is older than the reference users run) and no torch.compile
# (bench/compare_precision_table.py prints the table).
#   bench/setup_torch.sh    # once: about 5 GB, most of it NVIDIA libraries PyPI's wheel links
#   bench/compare_torch.sh [BUILD_DIR] [--rounds N] [--workloads a,b] [--threads 1,2] [--batch 16,64]
#                          [--no-torch2] [--no-compile] [--compile-timeout S] [--precision fp32|bf16]
# The full comparison: bench/compare_torch.sh build --rounds 5 on a quiet machine (about 75 min at 1,2 on
# a 2-core Zen 4 VM, most of it torch.compile's processes; 20 min with --no-compile).
set -euo pipefail
build=build
rounds=3
workloads=mnist_cnn,mlp_gan,dcgan,lstm_lm,lstm_classifier,bilstm
threads=1,2
batches=0
torch2=1
compile=1
compile_timeout=900
precision=fp32
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --batch) batches=$2; shift 2 ;;
    --no-torch2) torch2=0; shift ;;
    --no-compile) compile=0; shift ;;
    --compile-timeout) compile_timeout=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare_torch.sh: unknown flag $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "compare_torch.sh: --rounds expects a positive number" >&2; exit 2; }
[[ $precision == fp32 || $precision == bf16 ]] || {
  echo "compare_torch.sh: --precision expects fp32 or bf16, got '$precision'" >&2
  exit 2
}
needed="step_rate torch_ref sgemm_rate"
if [[ $precision == bf16 ]]; then
  needed=step_rate
  ((torch2)) || { echo "compare_torch.sh: --precision bf16 compares with PyTorch 2.x: drop --no-torch2" >&2; exit 2; }
fi
for p in $needed; do
  if [[ ! -x "$build/bench/$p" ]]; then
    echo "compare_torch.sh: $build/bench/$p is missing (torch_ref is built only when libtorch was found)" >&2
    exit 1
  fi
done
here=$(cd "$(dirname "$0")" && pwd)
py=$here/.venv-torch/bin/python
if ((torch2)) && [[ ! -x $py ]]; then
  echo "compare_torch.sh: $py is missing: run bench/setup_torch.sh (or pass --no-torch2)" >&2
  exit 1
fi
# ember info's cpu line carries cpuid's family and model: the brand string can be a bare "AMD EPYC".
info=$("$build/tools/ember" info 2>/dev/null || true)
# The OpenBLAS kernels Ember runs (and who chose them): "Cooperlake", "SkylakeX (Ember's choice
# over OpenBLAS's Prescott)", ...; libtorch 1.13's process gets the same family.
blas=$(grep -m1 '^blas kernels:' <<<"$info" | sed 's/^blas kernels: *//; s/^OpenBLAS *//' || true)
core=${blas%% *}
[[ -n $core ]] || { echo "compare_torch.sh: no 'blas kernels' line from $build/tools/ember info" >&2; exit 1; }
out=$(mktemp)
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
IFS=, read -r -a wl <<< "$workloads"
IFS=, read -r -a th <<< "$threads"
IFS=, read -r -a bs <<< "$batches"
cpu=$(grep -m1 '^cpu:' <<<"$info" | sed 's/^cpu: *//' || true)
[[ -n $cpu ]] || cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
level=$(grep -m1 'level in use' <<<"$info" | sed 's/  */ /g' || true)
if [[ $precision == bf16 ]]; then
  for ((r = 1; r <= rounds; r++)); do
    for w in "${wl[@]}"; do
      for b in "${bs[@]}"; do
        for t in "${th[@]}"; do
          echo "round $r/$rounds: $w, batch $b (0: its own), $t thread(s), fp32 and bf16" >&2
          for p in fp32 bf16; do
            echo "$r ember_$p $(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$build/bench/step_rate" --workload "$w" \
              --threads "$t" --batch "$b" --precision "$p")" >> "$out"
          done
          for ((u = 1; u <= t; u++)); do
            for p in fp32 bf16; do
              echo "$r torch_$p $(OMP_NUM_THREADS=$u MKL_NUM_THREADS=$u "$py" "$here/torch2_ref.py" --workload "$w" \
                --threads "$u" --batch "$b" --precision "$p" 2>/dev/null)" >> "$out"
            done
          done
        done
      done
    done
  done
  torch2v=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')
  python3 "$here/compare_precision_table.py" "$out" "$cpu" "$level" "$rounds" "$workloads" "$threads" "$torch2v"
  exit 0
fi
for w in "${wl[@]}"; do
  for b in "${bs[@]}"; do
    "$build/bench/step_rate" --workload "$w" --batch "$b" --flops >> "$out"
  done
done
for ((r = 1; r <= rounds; r++)); do
  # The machine's SGEMM rate every round, so that a drift in the VM's speed moves the ceiling
  # with the workloads it is compared to.
  for t in "${th[@]}"; do
    echo "$r sgemm $("$build/bench/sgemm_rate" --threads "$t")" >> "$out"
  done
  for w in "${wl[@]}"; do
    for b in "${bs[@]}"; do
      for t in "${th[@]}"; do
        echo "round $r/$rounds: $w, batch $b (0: its own), $t thread(s)" >&2
        echo "$r ember $(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$build/bench/step_rate" --workload "$w" --threads "$t" --batch "$b")" >> "$out"
        for ((u = 1; u <= t; u++)); do
          echo "$r torch $(OPENBLAS_CORETYPE=$core OMP_NUM_THREADS=$u OPENBLAS_NUM_THREADS=$u "$build/bench/torch_ref" --workload "$w" --threads "$u" --batch "$b" 2>"$err")" >> "$out"
          grep -q "OpenBLAS $core" "$err" || { echo "compare_torch.sh: torch_ref did not run OpenBLAS $core: $(cat "$err")" >&2; exit 1; }
          ((torch2)) || continue
          echo "$r torch2 $(OMP_NUM_THREADS=$u MKL_NUM_THREADS=$u "$py" "$here/torch2_ref.py" --workload "$w" --threads "$u" --batch "$b" 2>/dev/null)" >> "$out"
          ((compile)) || continue
          cache=$(mktemp -d)
          rc=0
          line=$(TORCHINDUCTOR_CACHE_DIR=$cache OMP_NUM_THREADS=$u MKL_NUM_THREADS=$u timeout "$compile_timeout" \
            "$py" "$here/torch2_ref.py" --workload "$w" --threads "$u" --batch "$b" --compile 2>"$err") || rc=$?
          rm -rf "$cache"
          if ((rc == 0)); then
            echo "$r torch2c $line" >> "$out"
            grep -m1 '^# compile ' "$err" | sed "s/^# compile /$r compile $b /" >> "$out" || true
          elif ((rc == 124)); then
            echo "$r nocompile $w $b over the ${compile_timeout} s cap" >> "$out"
          else
            reason=$(grep -m1 '^# did not compile' "$err" | sed 's/^# did not compile [^:]*: //' || true)
            echo "$r nocompile $w $b ${reason:-exit $rc: $(tail -1 "$err")}" >> "$out"
          fi
        done
      done
    done
  done
done
torch2v=$( ((torch2)) && "$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
COMPARE_DIR=$here python3 - "$out" "$cpu" "$level" "$rounds" "$workloads" "$threads" "$blas" "$torch2v" <<'PY'
import os, sys
sys.path.insert(0, os.environ["COMPARE_DIR"])
from compare_stats import best as best_of, med, spread
path, cpu, level, rounds, workloads, threads, blas, torch2v = sys.argv[1:]
runs, per, gflop, executed, sgemm, comp, nocomp = {}, {}, {}, {}, {}, {}, {}
for line in open(path):
    f = line.split()
    if f[0] == "flops":  # "flops <workload> <batch> <nominal> <executed>"
        executed[(f[1], int(f[2]))] = float(f[4])
        continue
    r, kind = int(f[0]), f[1]
    if kind == "sgemm":  # "r sgemm sgemm <threads> <n> <GFLOP/s>"
        sgemm.setdefault(int(f[3]), {})[r] = float(f[5])
    elif kind == "compile":  # "r compile <batch arg> <workload> <threads> <first step s> <graphs> <breaks>"
        comp.setdefault(f[3], []).append((float(f[5]), int(f[6]), int(f[7])))
    elif kind == "nocompile":
        nocomp.setdefault(f[2], " ".join(f[4:]))
    elif len(f) >= 8:  # "r <engine> <workload> <threads> <median> <min> <max> <batch> <GFLOP>"
        w, t, m, batch = f[2], int(f[3]), float(f[4]), int(f[7])
        per[(w, batch)], gflop[(w, batch)] = batch, float(f[8])
        runs.setdefault((kind, w, batch, t), {})[r] = m
print(f"CPU: {cpu}; {level or 'capability level: see ember info'}; BLAS: OpenBLAS {blas or '?'} (Ember's and libtorch 1.13's)")
print(f"Ember (bench/step_rate), libtorch 1.13 (bench/torch_ref), PyTorch {torch2v} (bench/torch2_ref.py, eager and "
      f"torch.compile), separate processes alternating, {rounds} rounds")
print("SGEMM (OpenBLAS, 2048^3): " + ", ".join(
    f"{spread(v.values())} GFLOP/s at {t} thread(s)" for t, v in sorted(sgemm.items())))
print("rates in samples/s: median over rounds of each process's median of 3 runs [min-max over rounds]; "
      "ratios: Ember / other, median of the per-round ratios [min-max]\n")
hdr = ["workload", "batch", "thr", "Ember", "libtorch 1.13 (thr)", "ratio", f"PyTorch {torch2v} (thr)", "ratio",
       "compiled (thr)", "ratio", "GFLOP/step nom/exec", "Ember GFLOP/s exec", "of SGEMM", "PyTorch of SGEMM",
       "ceiling"]
rows = []
def best(kind, w, batch, t):
    return best_of(runs, kind, w, batch, t)
for w, batch in sorted({(k[1], k[2]) for k in runs if k[0] == "ember"},
                       key=lambda x: (workloads.split(",").index(x[0]), x[1])):
    k = per[(w, batch)]
    ex = executed.get((w, batch))
    for t in (int(x) for x in threads.split(",")):
        e = runs.get(("ember", w, batch, t))
        if not e:
            continue
        row = [w, str(batch), str(t), spread(e.values(), k)]
        for kind in ("torch", "torch2", "torch2c"):
            b = best(kind, w, batch, t)
            if not b:
                row += ["did not compile" if kind == "torch2c" and w in nocomp else "-", "-"]
                continue
            u, v = b
            ratios = [e[r] / v[r] for r in e if r in v]
            row += [f"{spread(v.values(), k)} ({u})", spread(ratios, fmt="{:.2f}")]
        row.append(f"{gflop[(w, batch)]:.3g} / {ex:.3g}" if ex else f"{gflop[(w, batch)]:.3g} / -")
        row.append(spread((e[r] * ex for r in e), fmt="{:.1f}") if ex else "-")
        row.append(spread((e[r] * ex / sgemm[t][r] * 100 for r in e if r in sgemm.get(t, {})), fmt="{:.0f}") + "%"
                   if ex and t in sgemm else "-")
        # PyTorch 2.x eager at the same executed FLOPs, and the ratio an engine that ran every one of
        # them at the SGEMM rate would reach against it: the most any fp32 engine can show here.
        b = best("torch2", w, batch, t)
        if ex and t in sgemm and b:
            v = b[1]
            rs = [r for r in v if r in sgemm[t]]
            row.append(spread((v[r] * ex / sgemm[t][r] * 100 for r in rs), fmt="{:.0f}") + "%")
            row.append(spread((sgemm[t][r] / ex / v[r] for r in rs), fmt="{:.2f}"))
        else:
            row += ["-", "-"]
        rows.append(row)
widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
print("  ".join(h.ljust(widths[i]) for i, h in enumerate(hdr)))
for r in rows:
    print("  ".join(c.ljust(widths[i]) if i < 3 else c.rjust(widths[i]) for i, c in enumerate(r)))
if comp or nocomp:
    print("\ntorch.compile (models compiled, optimizer eager; cold Inductor cache per process): first step, "
          "compiling included, median [min-max] over processes; graphs / graph breaks")
    for w in workloads.split(","):
        if w in comp:
            c = comp[w]
            print(f"  {w}: {spread((x[0] for x in c), fmt='{:.1f}')} s; {c[0][1]} graph(s), {c[0][2]} break(s)")
        elif w in nocomp:
            print(f"  {w}: did not compile: {nocomp[w]}")
PY
