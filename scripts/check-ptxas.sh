#!/usr/bin/env bash
# Compiler launcher for CUDA sources (cmake/EmberCUDA.cmake sets it; nvcc runs with -Xptxas=-v).
# Runs the compile command it is given, keeps ptxas's per-kernel report beside the object file
# (<object>.ptxas.log: registers, stack, spills per kernel and architecture) and fails the
# compile when a kernel spills registers ("N bytes spill stores" with N > 0) unless its source
# file says why that is accepted, with a comment of the form
#     // spill-accepted: <reason>
# Usage: check-ptxas.sh <compiler> <arguments...>
set -uo pipefail

src="" obj="" prev=""
for arg in "$@"; do
  case "$arg" in *.cu) src="$arg" ;; esac
  if [[ "$prev" == "-o" ]]; then obj="$arg"; fi
  prev="$arg"
done

log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>"$log"
rc=$?
# Hand on what ptxas -v did not add (warnings, errors), so the build log stays readable.
grep -v -E '^ptxas info +:|^ +[0-9]+ bytes stack frame' "$log" >&2
if ((rc != 0)); then
  exit "$rc"
fi
if [[ -n "$obj" ]]; then
  cp "$log" "$obj.ptxas.log" 2>/dev/null || true
fi

# "Function properties for F" precedes F's "... N bytes spill stores, M bytes spill loads" line;
# the architecture comes from the last "Compiling entry function 'F' for 'sm_XX'".
spills=$(awk '
  /Compiling entry function/ { if (match($0, /for .sm_[0-9a-z]+/)) arch = substr($0, RSTART + 5, RLENGTH - 5) }
  /Function properties for/ { fn = $NF }
  /bytes spill stores/ {
    stores = 0
    for (i = 1; i < NF; i++) if ($(i + 1) == "bytes" && $(i + 2) == "spill" && $(i + 3) == "stores,") stores = $i
    if (stores + 0 > 0) printf "  %s (%s): %s\n", fn, arch, $0
  }' "$log")
if [[ -z "$spills" ]]; then
  exit 0
fi
if command -v c++filt >/dev/null; then
  spills=$(c++filt <<<"$spills")
fi
if [[ -n "$src" ]] && grep -qE '//[[:space:]]*spill-accepted:[[:space:]]*[^[:space:]]' "$src"; then
  printf 'check-ptxas: note: %s spills registers (accepted in the source):\n%s\n' "$src" "$spills" >&2
  exit 0
fi
printf 'check-ptxas: error: %s: kernels spill registers to local memory:\n%s\n' "${src:-<unknown source>}" "$spills" >&2
printf 'check-ptxas: reduce register pressure, or add "// spill-accepted: <reason>" to the source.\n' >&2
if [[ -n "$obj" ]]; then
  rm -f "$obj"  # so that the next build compiles it again
fi
exit 1
