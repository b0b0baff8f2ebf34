#!/usr/bin/env python3
"""Summarises the outputs of bench/compare_builds.sh: build A against build B, row by row.

Why a second measure beside the raw rate: on a shared VM the machine's speed drifts by up to
±30% between processes, more than the difference between two builds. The bench programs time
libtorch in the same process as Ember (bench/layers interleaves the two call by call), and
libtorch is the same library in both builds, so libtorch's rates say how fast each process's
machine ran. One libtorch row alone is a poor gauge (its MNIST c1 forward is bimodal between
processes, 8 or 84 GFLOP/s), so the gauge is the median over all rows. For each row and round:

  raw       = Ember rate in A / Ember rate in B     (A's process against B's, in the same round)
  drift     = median over rows of libtorch rate in A / libtorch rate in B
  corrected = raw / drift

and their medians over the rounds (above 1.00: A is faster), then the geometric mean over rows.

  bench/compare_builds_summary.py OUT_DIR PROGRAM
"""
import math
import pathlib
import re
import statistics
import sys


def number(cell):
    """The leading number of a cell ("4.21 GFLOP/s", "3,872", "150 [144-155]"); None for "n/a" or "-"."""
    m = re.match(r"[0-9][0-9,]*\.?[0-9]*", cell)
    return float(m.group(0).replace(",", "")) if m else None


def parse_table(path):
    """Returns {row key: (Ember rate, libtorch rate or None)} from the first Markdown table of an output."""
    header, rows = None, {}
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            if header and rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
            ember = next((i for i, h in enumerate(header) if h.startswith("ember")), None)
            torch = next((i for i, h in enumerate(header) if h.startswith("libtorch")), None)
            if ember is None:
                raise SystemExit(f"{path}: the table has no 'ember...' column: {header}")
            continue
        if set(line.replace("|", "").strip()) <= set("-: "):
            continue  # the separator row
        if len(cells) != len(header):
            raise SystemExit(f"{path}: a row has {len(cells)} cells, the header {len(header)}: {line}")
        key = ", ".join(cells[:ember])
        rate = number(cells[ember])
        if rate is None:
            raise SystemExit(f"{path}: row '{key}' has no number in its Ember column: '{cells[ember]}'")
        rows[key] = (rate, number(cells[torch]) if torch is not None else None)
    if not rows:
        raise SystemExit(f"{path}: no table found")
    return rows


def fmt(xs):
    return " / ".join(f"{x:.2f}" for x in xs)


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: bench/compare_builds_summary.py OUT_DIR PROGRAM")
    out, prog = pathlib.Path(sys.argv[1]), sys.argv[2]
    rounds = []
    for r in range(1, 10_000):
        a, b = out / f"{prog}.a.{r}.txt", out / f"{prog}.b.{r}.txt"
        if not a.exists() or not b.exists() or a.stat().st_size == 0 or b.stat().st_size == 0:
            break  # no more rounds, or one still running
        rounds.append((parse_table(a), parse_table(b)))
    if not rounds:
        raise SystemExit(f"no rounds in {out} ({prog}.a.1.txt and {prog}.b.1.txt expected)")
    keys = list(rounds[0][0])
    for a, b in rounds:
        for k in keys:
            if k not in a or k not in b:
                raise SystemExit(f"row '{k}' is missing from a round")
    drifts = []
    for a, b in rounds:
        d = [a[k][1] / b[k][1] for k in keys if a[k][1] and b[k][1]]
        drifts.append(statistics.median(d) if d else None)
    corrected = all(d is not None for d in drifts)
    print(f"{prog}: {len(rounds)} rounds; A over B, medians over rounds (above 1.00: A is faster)")
    if corrected:
        print(f"drift (median over rows of libtorch in A / in B), per round: {fmt(drifts)}")
    print("\n| row | raw A/B per round | raw | corrected |")
    print("|---|---|---:|---:|")
    raws, cors = [], []
    for k in keys:
        raw = [a[k][0] / b[k][0] for a, b in rounds]
        raws.append(statistics.median(raw))
        cell = "n/a"
        if corrected:
            cors.append(statistics.median([x / d for x, d in zip(raw, drifts)]))
            cell = f"{cors[-1]:.2f}"
        print(f"| {k} | {fmt(raw)} | {raws[-1]:.2f} | {cell} |")

    def gmean(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    line = f"\ngeometric mean over {len(raws)} rows: raw {gmean(raws):.3f} (min {min(raws):.2f})"
    if cors:
        line += f", corrected {gmean(cors):.3f} (min {min(cors):.2f})"
    print(line)


if __name__ == "__main__":
    main()
