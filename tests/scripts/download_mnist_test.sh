#!/usr/bin/env bash
# scripts/download-mnist.sh must fail cleanly (exit 1, a message, no partial files) when no mirror
# is reachable or a file's checksum is wrong.
set -u
script="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/mirror"
echo "not mnist" >"$work/mirror/train-images-idx3-ubyte.gz"

EMBER_MNIST_MIRRORS="file://$work/nowhere" bash "$script" "$work/out1" 2>"$work/err1"
rc=$?
[[ $rc -eq 1 ]] || { echo "expected exit 1 with no mirror, got $rc"; exit 1; }
grep -q "could not download" "$work/err1" || { echo "missing message"; cat "$work/err1"; exit 1; }
[[ -z "$(ls -A "$work/out1")" ]] || { echo "partial files left:"; ls -la "$work/out1"; exit 1; }

EMBER_MNIST_MIRRORS="file://$work/mirror" bash "$script" "$work/out2" 2>"$work/err2"
rc=$?
[[ $rc -eq 1 ]] || { echo "expected exit 1 on a bad checksum, got $rc"; exit 1; }
grep -q "expected f68b3c2dcbeaaa9fbdd348bbdeb94873" "$work/err2" || { echo "missing md5 message"; cat "$work/err2"; exit 1; }
[[ -z "$(ls -A "$work/out2")" ]] || { echo "partial files left:"; ls -la "$work/out2"; exit 1; }
echo "download-mnist fails cleanly"
