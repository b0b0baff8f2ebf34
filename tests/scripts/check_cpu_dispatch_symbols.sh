#!/usr/bin/env bash
# The one-definition guard of run-time CPU dispatch (core/cpu/capability.h): every .cpp of a cpu/
# folder is compiled once per level, and a weak (inline or template) symbol that two levels both
# define is merged by the linker into one copy. That copy must be the baseline one, or baseline
# code on a CPU without AVX would call AVX code. So, in the build tree <build>:
#   1. every weak symbol an avx2/avx512 copy defines is either in that level's own namespace
#      (ember::cpu::level_<level>, which no other level shares) or defined by the baseline copy of
#      the same source too;
#   2. on each link line, the baseline copy of a source comes before its other copies (the linkers
#      Ember is built with keep the first definition of a weak symbol).
# The build's levels (CMake's EMBER_CPU_LEVELS, e.g. "baseline;avx2;avx512") say how many copies
# there must be: with levels above the baseline, finding no per-level object is a failure (a moved
# build folder or a changed object layout would otherwise pass having checked nothing); with the
# baseline (or native) alone there is nothing to check, and the script exits 77 (ctest: skipped).
# Usage: check_cpu_dispatch_symbols.sh <build dir> <levels>
set -euo pipefail
build=${1:?usage: check_cpu_dispatch_symbols.sh <build dir> <levels>}
levels=${2:?usage: check_cpu_dispatch_symbols.sh <build dir> <levels>}
dispatched=$(tr ';' '\n' <<<"$levels" | grep -cvE '^(baseline|native)$' || true)
if ((dispatched == 0)); then
  echo "skipped: this build has one CPU level ($levels), so no weak symbol can be kept from another"
  exit 77
fi
fail=0
checked=0
weak_symbols() {  # the weak and unique symbols an object defines, mangled, sorted
  nm --defined-only -P "$1" | awk '$2 ~ /^[WwVvu]$/ {print $1}' | sort -u
}
while IFS= read -r obj; do
  level=$(sed -E 's|.*/cpu_dispatch/([a-z0-9]+)/.*|\1|' <<<"$obj")
  [[ $level == baseline || $level == native ]] && continue
  base=$(sed -E "s|/cpu_dispatch/$level/|/cpu_dispatch/baseline/|" <<<"$obj")
  if [[ ! -f $base ]]; then
    echo "$obj: no baseline copy at $base"
    fail=1
    continue
  fi
  stray=$(comm -23 <(weak_symbols "$obj" | grep -v "level_$level" || true) <(weak_symbols "$base"))
  if [[ -n $stray ]]; then
    echo "$obj: weak symbols outside ember::cpu::level_$level that the baseline copy does not define:"
    c++filt <<<"$stray" | sed 's/^/  /' | head -20
    fail=1
  fi
  checked=$((checked + 1))
done < <(find "$build" -path '*/cpu_dispatch/*' -name '*.o' | sort)

# 2: the link lines in build.ninja.
if [[ -f $build/build.ninja ]]; then
  while IFS= read -r line; do
    objs=$(tr ' ' '\n' <<<"$line" | grep '/cpu_dispatch/' || true)
    [[ -z $objs ]] && continue
    declare -A seen_base=()
    while IFS= read -r o; do
      level=$(sed -E 's|.*/cpu_dispatch/([a-z0-9]+)/.*|\1|' <<<"$o")
      key=$(sed -E 's|/cpu_dispatch/[a-z0-9]+/|/|' <<<"$o")
      if [[ $level == baseline ]]; then
        seen_base[$key]=1
      elif [[ $level != native && -z ${seen_base[$key]:-} ]]; then
        echo "link line of $(awk '{print $2}' <<<"$line"): $o comes before its baseline copy"
        fail=1
      fi
    done <<<"$objs"
    unset seen_base
  done < <(grep -E '^build [^:]+: CXX_(SHARED_LIBRARY|EXECUTABLE|MODULE)_LINKER' "$build/build.ninja")
fi

if ((checked == 0)); then
  echo "$build: the build has the levels $levels but no per-level object (*/cpu_dispatch/<level>/*.o) was found"
  fail=1
fi
if ((fail)); then
  echo "check_cpu_dispatch_symbols: FAILED"
  exit 1
fi
echo "check_cpu_dispatch_symbols: $checked per-level objects checked, all weak symbols resolve to baseline copies"
