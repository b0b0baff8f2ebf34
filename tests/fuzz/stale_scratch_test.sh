#!/usr/bin/env bash
# A fuzz target that crashed leaves its scratch file (/dev/shm/ember-fuzz-PID...) behind; the next
# target to start removes the files of processes that no longer exist and keeps a live one's.
set -euo pipefail
target=$1 corpus=$2
dir=/dev/shm
[[ -w $dir ]] || dir=${TMPDIR:-/tmp}
bash -c 'exit 0' &
dead=$!
wait "$dead"
stale="$dir/ember-fuzz-$dead.csv"
live="$dir/ember-fuzz-$$.csv"
printf 'left by a crash' >"$stale"
printf 'in use' >"$live"
trap 'rm -f "$stale" "$live"' EXIT
"$target" "$corpus" >/dev/null
if [[ -e $stale ]]; then
  echo "FAIL: $stale (pid $dead, gone) is still there"
  exit 1
fi
if [[ ! -e $live ]]; then
  echo "FAIL: $live (pid $$, this running test) was removed"
  exit 1
fi
echo "stale scratch file removed, live one kept"
