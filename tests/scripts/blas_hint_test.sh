#!/usr/bin/env bash
# `ember info` names the OpenBLAS kernels in use and who chose them, and hints at OPENBLAS_CORETYPE
# exactly when that variable holds OpenBLAS below the CPU. Without the variable the kernels must be
# the best family the CPU runs: OpenBLAS's own pick, or Ember's where OpenBLAS's was older.
#   blas_hint_test.sh EMBER_EXE
set -uo pipefail
ember=$1
failures=0
# What the CPU can run, whatever levels this build has ("cpu features" lists only what the OS
# enables too): the AVX-512 level is F, BW, CD, DQ and VL on top of AVX2.
features=" $(env -u OPENBLAS_CORETYPE "$ember" info | grep '^cpu features:' | sed 's/^cpu features: *//') "
has() { for f in "$@"; do [[ $features == *" $f "* ]] || return 1; done; }
level=0
has avx2 fma && level=1
has avx2 fma avx512f avx512bw avx512cd avx512dq avx512vl && level=2
family_level() {  # family_level NAME: 0 before AVX2, 1 AVX2, 2 AVX-512, ? unknown
  case ${1,,} in
    skylakex | cooperlake | sapphirerapids) echo 2 ;;
    haswell | zen | excavator) echo 1 ;;
    prescott | nehalem | sandybridge | core2 | penryn | dunnington | atom | barcelona | bulldozer | \
      piledriver | steamroller | bobcat | opteron* | athlon | nano | katmai | coppermine | northwood | banias) echo 0 ;;
    *) echo '?' ;;
  esac
}
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
check() {  # check CORETYPE ("" for none)
  local out line kernels hint
  if [[ -n $1 ]]; then out=$(OPENBLAS_CORETYPE=$1 "$ember" info); else out=$(env -u OPENBLAS_CORETYPE "$ember" info); fi
  line=$(grep '^blas kernels:' <<<"$out" | sed 's/^blas kernels: *OpenBLAS //')
  [[ -n $line ]] || { fail "OPENBLAS_CORETYPE=$1: no 'blas kernels:' line"; echo "$out"; return; }
  kernels=${line%% *}
  hint=0
  grep -q "^hint: .*OPENBLAS_CORETYPE=$1 in the environment" <<<"$out" && hint=1
  local fl
  fl=$(family_level "$kernels")
  if [[ -n $1 ]]; then
    # Kept as asked, and named; a hint exactly when it is below the CPU.
    [[ $line == "$kernels (OPENBLAS_CORETYPE=$1)" ]] || fail "OPENBLAS_CORETYPE=$1: '$line' does not name the variable"
    local want=0
    [[ $fl != '?' ]] && ((fl < level)) && want=1
    ((hint == want)) || fail "OPENBLAS_CORETYPE=$1: kernels $kernels on a level-$level CPU: hint $hint, expected $want"
  else
    ((hint == 0)) || fail "no OPENBLAS_CORETYPE: a hint about it"
    if grep -q '^hint:' <<<"$out"; then fail "no OPENBLAS_CORETYPE: $(grep '^hint:' <<<"$out")"; fi
    [[ $fl == '?' ]] || ((fl >= level)) || fail "no OPENBLAS_CORETYPE: kernels $kernels below the CPU (level $level)"
  fi
  echo "ok   OPENBLAS_CORETYPE=${1:-(unset)}: $line, hint $hint"
}
check ""
check Prescott
((level >= 1)) && check Haswell
((level >= 2)) && check SKYLAKEX
if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
