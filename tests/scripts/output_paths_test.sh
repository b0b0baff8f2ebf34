#!/usr/bin/env bash
# `ember sched simulate --out/--csv/--svg` at what a user may name: a symbolic link (followed, kept),
# a pipe (written into; one nobody reads is an error), a folder and a link to nothing (refused),
# /dev/full (an error) and, as root, a device node this test makes (an error, and still a device).
# Usage: output_paths_test.sh EMBER TRACE
set -uo pipefail
ember=$1
trace=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
failures=0
passed=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
sim() { "$ember" sched simulate --trace "$trace" --gpus 4 --policy fcfs "$@"; }

# A symlink: the file it names gets the report, the link stays a link.
echo old >"$d/real.json"
ln -s real.json "$d/link.json"
if sim --out "$d/link.json" >/dev/null 2>"$d/err" && [[ -L $d/link.json ]] && grep -q '"policy"' "$d/real.json"; then
  ok "a symlink is followed and kept"
else
  fail "a symlink: $(cat "$d/err")"
fi

# A pipe with a reader gets the CSV; the pipe is still a pipe. The test holds the reading end
# itself (opened read-write, which does not wait for a writer), so no second process races it.
mkfifo "$d/pipe"
exec 3<>"$d/pipe"
if sim --csv "$d/pipe" >/dev/null 2>"$d/err" && IFS= read -r -t 10 first <&3 && [[ $first == *policy* && -p $d/pipe ]]; then
  ok "a pipe is written into"
else
  fail "a pipe: $(cat "$d/err")"
fi
exec 3<&-

# Refused, exit status 1, nothing replaced: a pipe nobody reads, a folder, a link to nothing.
mkdir "$d/folder"
ln -s nowhere.svg "$d/dangling.svg"
for case in "pipe|--svg|no process is reading" "folder|--out|is a folder" "dangling.svg|--svg|which does not exist"; do
  IFS='|' read -r name flag says <<<"$case"
  sim "$flag" "$d/$name" >/dev/null 2>"$d/err"
  rc=$?
  if [[ $rc -eq 1 ]] && grep -q "$says" "$d/err"; then ok "$name refused"; else fail "$name: status $rc, $(cat "$d/err")"; fi
done
[[ -p $d/pipe && -d $d/folder && -L $d/dangling.svg && ! -e $d/nowhere.svg ]] && ok "refused targets untouched" ||
  fail "a refused target was changed"

# Devices: /dev/full refuses the data, and as root a node made here stays a node.
sim --out /dev/full >/dev/null 2>"$d/err"
rc=$?
if [[ $rc -eq 1 ]] && grep -q "No space left" "$d/err" && [[ -c /dev/full ]]; then ok "/dev/full is an error"; else
  fail "/dev/full: status $rc, $(cat "$d/err")"
fi
if [[ $(id -u) -eq 0 ]] && mknod "$d/full" c 1 7 2>/dev/null; then
  sim --out "$d/full" >/dev/null 2>"$d/err"
  rc=$?
  if [[ $rc -eq 1 && -c $d/full ]]; then ok "a device node stays a device node"; else fail "device node: status $rc"; fi
else
  echo "note: not root (or mknod refused): the device-node case did not run"
fi
echo "$passed passed, $failures failed"
((failures == 0))
