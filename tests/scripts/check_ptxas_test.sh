#!/usr/bin/env bash
# Tests scripts/check-ptxas.sh with a stand-in compiler that prints a recorded ptxas report.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check="$here/../../scripts/check-ptxas.sh"
fx="$here/fixtures/ptxas"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# run <log> <source> [exit code of the fake compiler]: "compiles" <source> to $tmp/k.o.
run() {
  touch "$tmp/k.o"
  "$check" bash -c 'cat "$1" >&2; exit "$2"' fake "$1" "${3:-0}" "$2" -o "$tmp/k.o" 2>"$tmp/err"
}
expect() {  # expect <name> <wanted exit code> <actual exit code> [text the output must contain]
  if [[ "$2" != "$3" ]] || { [[ -n "${4:-}" ]] && ! grep -qF -- "$4" "$tmp/err"; }; then
    echo "FAIL $1: exit $3 (wanted $2)${4:+, output should contain '$4'}:"
    sed 's/^/  | /' "$tmp/err"
    failures=$((failures + 1))
  else
    echo "ok   $1"
  fi
}

run "$fx/spills.log" "$fx/plain.cu"
expect "spills without annotation fail" 1 $? "ember::cuda::gemm(float*, float*, int) (sm_80)"
[[ ! -e "$tmp/k.o" ]] || { echo "FAIL object of a rejected compile was kept"; failures=$((failures + 1)); }

run "$fx/spills.log" "$fx/accepted.cu"
expect "spills with spill-accepted pass" 0 $? "accepted in the source"
[[ -e "$tmp/k.o.ptxas.log" ]] || { echo "FAIL no ptxas report kept beside the object"; failures=$((failures + 1)); }

run "$fx/clean.log" "$fx/plain.cu"
expect "no spills pass, warnings shown" 0 $? "warning #177-D"
if grep -q "ptxas info" "$tmp/err"; then
  echo "FAIL ptxas info lines leaked into the build log"
  failures=$((failures + 1))
fi

run "$fx/clean.log" "$fx/plain.cu" 3
expect "compiler failure is passed on" 3 $?

echo "$((4 - failures)) passed, $failures failed"
((failures == 0))
