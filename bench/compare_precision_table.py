#!/usr/bin/env python3
"""The table of bench/compare_torch.sh --precision bf16 (issue 51's targets: Ember's bf16 >= 1.5x its
own fp32 and >= 2x PyTorch 2.x's bf16 autocast at its best thread count).

Input lines: "<round> <engine>_<fp32|bf16> <workload> <threads> <median> <min> <max> <batch> <GFLOP>"
(bench/step_rate's and bench/torch2_ref.py's line after the round and engine; rates in steps/s).
Rates are printed in samples/s: the median over rounds of each process's median of 3 runs
[min-max over rounds]; ratios are the median of the per-round ratios [min-max]. PyTorch's columns
are its best thread count u <= T, chosen by the median over rounds, per precision.

usage: compare_precision_table.py OUT CPU LEVEL ROUNDS WORKLOADS THREADS TORCH_VERSION
"""
import sys

from compare_stats import best, spread


def main():
    path, cpu, level, rounds, workloads, threads, torchv = sys.argv[1:]
    runs, per = {}, {}
    for line in open(path):
        f = line.split()
        if len(f) < 9:
            continue  # a process that printed nothing (its error went to stderr)
        r, kind, w, t, m, batch = int(f[0]), f[1], f[2], int(f[3]), float(f[4]), int(f[7])
        per[(w, batch)] = batch
        runs.setdefault((kind, w, batch, t), {})[r] = m

    def ratio(a, b):
        rs = [a[r] / b[r] for r in a if r in b]
        return spread(rs, fmt="{:.2f}") if rs else "-"

    print(f"CPU: {cpu}; {level or 'capability level: see ember info'}")
    print(f"Ember (bench/step_rate [--precision bf16]: autocast), PyTorch {torchv} (bench/torch2_ref.py "
          f"[--precision bf16]: torch.autocast('cpu', torch.bfloat16)), eager, separate processes "
          f"alternating, {rounds} rounds")
    print("rates in samples/s: median over rounds of each process's median of 3 runs [min-max over rounds]; "
          "ratios: median of the per-round ratios [min-max]; PyTorch at its best thread count <= T (thr)\n")
    hdr = ["workload", "batch", "thr", "Ember fp32", "Ember bf16", f"PyTorch fp32 (thr)", f"PyTorch bf16 (thr)",
           "Ember bf16 / fp32", "Ember bf16 / PyTorch bf16", "PyTorch bf16 / fp32", "Ember fp32 / PyTorch fp32"]
    rows = []
    order = workloads.split(",")
    for w, batch in sorted({(k[1], k[2]) for k in runs if k[0] == "ember_fp32"},
                           key=lambda x: (order.index(x[0]) if x[0] in order else len(order), x[1])):
        k = per[(w, batch)]
        for t in (int(x) for x in threads.split(",")):
            e32, e16 = runs.get(("ember_fp32", w, batch, t)), runs.get(("ember_bf16", w, batch, t))
            p32, p16 = best(runs, "torch_fp32", w, batch, t), best(runs, "torch_bf16", w, batch, t)
            if not e32 or not e16 or not p32 or not p16:
                continue
            rows.append([w, str(batch), str(t), spread(e32.values(), k), spread(e16.values(), k),
                         f"{spread(p32[1].values(), k)} ({p32[0]})", f"{spread(p16[1].values(), k)} ({p16[0]})",
                         ratio(e16, e32), ratio(e16, p16[1]), ratio(p16[1], p32[1]), ratio(e32, p32[1])])
    if not rows:
        print("no complete row: every engine must print a line for a workload and thread count")
        return 1
    widths = [max(len(r[i]) for r in rows + [hdr]) for i in range(len(hdr))]
    print("  ".join(h.ljust(widths[i]) for i, h in enumerate(hdr)))
    for r in rows:
        print("  ".join(c.ljust(widths[i]) if i < 3 else c.rjust(widths[i]) for i, c in enumerate(r)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
