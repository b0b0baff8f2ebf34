#!/usr/bin/env bash
# Ember against standalone libtorch on the training workloads of bench/workloads.h, each engine in
# a process of its own, alternating: every round runs, for each workload and thread count T,
# bench/step_rate (Ember at T threads) and bench/torch_ref at every thread count t <= T (libtorch
# the way a careful user runs it: its best setting up to T, torch::set_num_threads(t) with OpenMP
# and OpenBLAS threads matched). Each process times 3 runs after a warm-up (bench/step_rate_main.h);
# the table gives the median over rounds of those medians, the min-max over rounds, Ember's rate
# over libtorch's best (> 1: Ember is faster), and Ember's GFLOP/s (bench/workloads.h counts the
# FLOP) against the machine's SGEMM rate at the same thread count (bench/sgemm_rate, OpenBLAS, measured
# every round; the median over rounds).
# With --batch 16,64,256 every workload runs at each batch size (the scaling table); without it, at
# its own batch (bench/workloads.h).
#   bench/compare_torch.sh [BUILD_DIR] [--rounds N] [--workloads a,b] [--threads 1,2] [--batch 16,64]
set -euo pipefail
build=build
rounds=3
workloads=mnist_cnn,mlp_gan,dcgan,lstm_lm,lstm_classifier,bilstm
threads=1,2
batches=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --batch) batches=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compare_torch.sh: unknown flag $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "compare_torch.sh: --rounds expects a positive number" >&2; exit 2; }
for p in step_rate torch_ref sgemm_rate; do
  if [[ ! -x "$build/bench/$p" ]]; then
    echo "compare_torch.sh: $build/bench/$p is missing (torch_ref is built only when libtorch was found)" >&2
    exit 1
  fi
done
out=$(mktemp)
trap 'rm -f "$out"' EXIT
IFS=, read -r -a wl <<< "$workloads"
IFS=, read -r -a th <<< "$threads"
IFS=, read -r -a bs <<< "$batches"
for ((r = 1; r <= rounds; r++)); do
  # The machine's SGEMM rate every round, so that a drift in the VM's speed moves the ceiling
  # with the workloads it is compared to (the table takes the median over rounds).
  for t in "${th[@]}"; do
    echo "sgemm $("$build/bench/sgemm_rate" --threads "$t")" >> "$out"
  done
  for w in "${wl[@]}"; do
    for b in "${bs[@]}"; do
      for t in "${th[@]}"; do
        echo "round $r/$rounds: $w, batch $b (0: its own), $t thread(s)" >&2
        echo "ember $(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$build/bench/step_rate" --workload "$w" --threads "$t" --batch "$b")" >> "$out"
        for ((u = 1; u <= t; u++)); do
          echo "torch $(OMP_NUM_THREADS=$u OPENBLAS_NUM_THREADS=$u "$build/bench/torch_ref" --workload "$w" --threads "$u" --batch "$b")" >> "$out"
        done
      done
    done
  done
done
# ember info's cpu line carries cpuid's family and model: the brand string can be a bare "AMD EPYC".
info=$("$build/tools/ember" info 2>/dev/null || true)
cpu=$(grep -m1 '^cpu:' <<<"$info" | sed 's/^cpu: *//' || true)
[[ -n $cpu ]] || cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
level=$(grep -m1 'level in use' <<<"$info" | sed 's/  */ /g' || true)
# The OpenBLAS kernels Ember runs (and who chose them). libtorch's GEMMs use the same OpenBLAS,
# its convolutions oneDNN, which picks its own instructions.
blas=$(grep -m1 '^blas kernels:' <<<"$info" | sed 's/^blas kernels: *//' || true)
python3 - "$out" "$cpu" "$level" "$rounds" "$workloads" "$threads" "$blas" <<'PY'
import statistics, sys
path, cpu, level, rounds, workloads, threads, blas = sys.argv[1:]
runs, per, gflop, sgemm = {}, {}, {}, {}
for line in open(path):
    f = line.split()
    if f[0] == "sgemm":  # "sgemm sgemm <threads> <n> <GFLOP/s>"
        sgemm.setdefault(int(f[2]), []).append(float(f[4]))
        continue
    engine, w, t, med, batch = f[0], f[1], int(f[2]), float(f[3]), int(f[6])
    per[(w, batch)], gflop[(w, batch)] = batch, float(f[7])
    runs.setdefault((engine, w, batch, t), []).append(med)
print(f"CPU: {cpu}; {level or 'capability level: see ember info'}; BLAS: {blas or 'see ember info'}")
print(f"Ember (bench/step_rate) and libtorch (bench/torch_ref), separate processes alternating, {rounds} rounds;")
sgemm_runs = sgemm
sgemm = {t: statistics.median(v) for t, v in sgemm_runs.items()}
print("SGEMM (OpenBLAS, 2048^3, median over rounds [min-max]): " + ", ".join(
    f"{sgemm[t]:.0f} [{min(v):.0f}-{max(v):.0f}] GFLOP/s at {t} thread(s)" for t, v in sorted(sgemm_runs.items())))
print("rates in samples/s: median over rounds of each process's median of 3 runs [min-max over rounds]\n")
hdr = ["workload", "batch", "threads", "Ember", "libtorch best (its threads)", "ratio", "Ember GFLOP/s", "of SGEMM"]
rows = []
for w, batch in sorted({(key[1], key[2]) for key in runs}, key=lambda x: (workloads.split(",").index(x[0]), x[1])):
    for t in (int(x) for x in threads.split(",")):
        e = runs.get(("ember", w, batch, t))
        if not e:
            continue
        k = per[(w, batch)]
        best = None
        for u in range(1, t + 1):
            v = runs.get(("torch", w, batch, u))
            if v and (best is None or statistics.median(v) > statistics.median(best[1])):
                best = (u, v)
        em = statistics.median(e) * k
        cell = f"{em:,.0f} [{min(e) * k:,.0f}-{max(e) * k:,.0f}]"
        if best:
            tm = statistics.median(best[1]) * k
            tcell = f"{tm:,.0f} [{min(best[1]) * k:,.0f}-{max(best[1]) * k:,.0f}] ({best[0]})"
            ratio = f"{em / tm:.2f}"
        else:
            tcell, ratio = "-", "-"
        steps = statistics.median(e)
        rows.append([w, str(batch), str(t), cell, tcell, ratio, f"{steps * gflop[(w, batch)]:.1f}",
                     f"{steps * gflop[(w, batch)] / sgemm[t]:.0%}" if t in sgemm else "-"])
widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
print("  ".join(h.ljust(widths[i]) for i, h in enumerate(hdr)))
for r in rows:
    print("  ".join(c.ljust(widths[i]) if i < 3 else c.rjust(widths[i]) for i, c in enumerate(r)))
PY
