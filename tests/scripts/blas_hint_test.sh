#!/usr/bin/env bash
# `ember info` names the kernels OpenBLAS chose and hints at OPENBLAS_CORETYPE exactly when they are
# below an AVX-512 CPU. OpenBLAS is forced to its AVX2 (Haswell) and, where the CPU has AVX-512, its
# SkylakeX kernels, so that both answers are checked on a machine that can run them.
#   blas_hint_test.sh EMBER_EXE
set -uo pipefail
ember=$1
failures=0
# What the CPU can run, whatever levels this build has ("cpu features" lists only what the OS
# enables too): the AVX-512 level is F, BW, CD, DQ and VL on top of AVX2.
features=" $("$ember" info | grep '^cpu features:' | sed 's/^cpu features: *//') "
has() { for f in "$@"; do [[ $features == *" $f "* ]] || return 1; done; }
avx512=0
has avx2 fma avx512f avx512bw avx512cd avx512dq avx512vl && avx512=1
check() {  # check CORETYPE
  local out kernels
  out=$(OPENBLAS_CORETYPE=$1 "$ember" info)
  kernels=$(grep '^blas kernels:' <<<"$out" | sed 's/^blas kernels: *OpenBLAS //')
  if [[ -z $kernels ]]; then
    echo "FAIL OPENBLAS_CORETYPE=$1: no 'blas kernels:' line"; echo "$out"; failures=$((failures + 1)); return
  fi
  local want_hint=0 has_hint
  [[ $avx512 == 1 && $kernels != SkylakeX && $kernels != Cooperlake && $kernels != SapphireRapids ]] && want_hint=1
  if grep -q '^hint: .*OPENBLAS_CORETYPE=SKYLAKEX' <<<"$out"; then has_hint=1; else has_hint=0; fi
  if ((has_hint == want_hint)); then
    echo "ok   OPENBLAS_CORETYPE=$1: kernels $kernels, hint $has_hint"
  else
    echo "FAIL OPENBLAS_CORETYPE=$1: kernels $kernels, CPU features$features: hint $has_hint, expected $want_hint"
    failures=$((failures + 1))
  fi
}
if ! has avx2 fma; then
  echo "skipped: this CPU has no AVX2, so OpenBLAS cannot be forced to its Haswell kernels"
  exit 0
fi
check Haswell
((avx512)) && check SKYLAKEX
if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
