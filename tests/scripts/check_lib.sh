# Sourced by the script tests: `check NAME CONDITION...` runs the condition, prints ok/FAIL with the
# name, and counts the failures in $failures for the script's exit status.
failures=0
check() {  # check <name> <condition...>
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
