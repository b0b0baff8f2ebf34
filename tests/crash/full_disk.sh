#!/usr/bin/env bash
# A checkpoint write that runs out of disk: the MNIST CNN checkpoints into a tmpfs this script
# mounts, sized to hold its first checkpoint but not a second copy beside it (an atomic write
# needs both until the rename). The run must stop with an error naming the checkpoint and the
# cause, the previous checkpoint must still read back intact, and a resume from it must work once
# there is room, ending bit-identical to an uninterrupted run. Needs root (mount); otherwise it says so and is skipped.
# usage: full_disk.sh CKPT_VERIFY MNIST_CNN
set -uo pipefail
verify=$1 program=$2
if [[ $(id -u) -ne 0 ]]; then
  echo "skipped: needs root to mount a small tmpfs"
  exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/ember-full-XXXXXX")
cleanup() {
  mountpoint -q "$work/disk" && umount "$work/disk"
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "full_disk: FAILED: $*"
  exit 1
}
args=(--limit 256 --epochs 2 --batch-size 32 --threads 1)
# How large one checkpoint is (and its model file), measured on a roomy disk.
"$program" "${args[@]}" --checkpoint-dir "$work/roomy" >/dev/null 2>&1 || fail "the uninterrupted run failed"
size=$(stat -c %s "$work/roomy/last.ckpt")
# Room for one checkpoint and the metrics log, not for the temporary copy of a second one.
kib=$(((size * 3 / 2) / 1024 + 16))
mkdir -p "$work/disk"
mount -t tmpfs -o "size=${kib}k" tmpfs "$work/disk" || {
  echo "skipped: cannot mount a tmpfs here"
  exit 0
}
"$program" "${args[@]}" --checkpoint-every 2 --checkpoint-dir "$work/disk/ckpt" >"$work/run.log" 2>&1
status=$?
((status != 0)) || fail "the run on a full disk exited 0"
grep -q "No space left on device" "$work/run.log" || { cat "$work/run.log"; fail "the error does not say the disk is full"; }
grep -q "$work/disk/ckpt/last.ckpt" "$work/run.log" || { cat "$work/run.log"; fail "the error does not name the checkpoint"; }
"$verify" read "$work/disk/ckpt/last.ckpt" || fail "the previous checkpoint does not read back"
# Room again: the run resumes from the surviving checkpoint and ends as the uninterrupted one.
mount -o "remount,size=64m" "$work/disk" || fail "cannot enlarge the tmpfs"
"$program" "${args[@]}" --checkpoint-every 2 --checkpoint-dir "$work/disk/ckpt" --resume auto >"$work/resume.log" 2>&1 ||
  { cat "$work/resume.log"; fail "the resume after the full disk failed"; }
"$verify" same "$work/roomy/last.ckpt" "$work/disk/ckpt/last.ckpt" || fail "the resumed run differs from the uninterrupted one"
echo "full_disk: a checkpoint write on a full disk (${size}-byte checkpoints, ${kib} KiB of disk) stopped the run with:"
grep -m1 "No space left on device" "$work/run.log"
echo "full_disk: the previous checkpoint read back intact, and the run resumed from it ended bit-identical to an" \
  "uninterrupted one"
