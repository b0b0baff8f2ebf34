#!/usr/bin/env python3
"""Registers, shared memory and spills of every hand-written CUDA kernel, from the ptxas logs a
CUDA build leaves beside its objects (cmake/EmberCUDA.cmake compiles each .cu with -Xptxas -v).

  scripts/ptxas-table.py [BUILD_DIR]     (default: build)

Prints a Markdown table, one row per (file, kernel template, architecture): the number of
instantiations, the range of registers per thread, the range of static shared memory per block,
and the spill bytes (stores + loads; any non-zero value fails scripts/check-ptxas.sh). Kernel
names are demangled with c++filt and reduced to the template's name."""
import collections
import glob
import os
import re
import subprocess
import sys

build = sys.argv[1] if len(sys.argv) > 1 else "build"
logs = sorted(glob.glob(os.path.join(build, "**", "*.cu.o.ptxas.log"), recursive=True))
if not logs:
    sys.exit(f"ptxas-table: no *.cu.o.ptxas.log under {build} (configure with EMBER_CUDA=ON and build first)")

entry = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
spill = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
used = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")

records = []  # (file, mangled, arch, regs, smem, spill)
for log in logs:
    src = os.path.basename(log)[: -len(".o.ptxas.log")]
    cur = None
    for line in open(log, encoding="utf-8", errors="replace"):
        m = entry.search(line)
        if m:
            cur = {"name": m.group(1), "arch": m.group(2), "spill": 0}
            continue
        if cur is None:
            continue
        m = spill.search(line)
        if m:
            cur["spill"] = int(m.group(1)) + int(m.group(2))
            continue
        m = used.search(line)
        if m:
            records.append((src, cur["name"], cur["arch"], int(m.group(1)), int(m.group(2) or 0), cur["spill"]))
            cur = None

names = sorted({r[1] for r in records})
out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
demangled = dict(zip(names, out.splitlines()))


def short(mangled):
    d = demangled.get(mangled, mangled).replace("(anonymous namespace)", "anon")
    d = d.split("(")[0]  # drop the parameter list
    depth, base = 0, ""
    for ch in d:  # drop template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            base += ch
    return base.split("::")[-1].split(" ")[-1].strip() or d


rows = collections.OrderedDict()
for src, name, arch, regs, smem, sp in records:
    key = (src, short(name), arch)
    r = rows.setdefault(key, {"n": 0, "regs": [], "smem": [], "spill": 0})
    r["n"] += 1
    r["regs"].append(regs)
    r["smem"].append(smem)
    r["spill"] += sp


def span(v):
    return f"{min(v)}-{max(v)}" if min(v) != max(v) else str(v[0])


print("| file | kernel | arch | instantiations | registers | static smem (bytes) | spill bytes |")
print("|---|---|---|---|---|---|---|")
for (src, kernel, arch), r in sorted(rows.items()):
    print(f"| {src} | {kernel} | {arch} | {r['n']} | {span(r['regs'])} | {span(r['smem'])} | {r['spill']} |")
total = sum(r["n"] for r in rows.values())
spilled = sum(1 for r in rows.values() if r["spill"])
print(f"\n{total} kernel/architecture pairs in {len(logs)} files; {spilled} rows with spills.")
