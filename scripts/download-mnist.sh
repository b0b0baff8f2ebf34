#!/usr/bin/env bash
# Downloads the four MNIST files into DIR (default data/mnist) and checks their MD5 sums.
# Offline, or when every mirror fails or a checksum does not match, it stops with a message and
# exit status 1, leaving no partial file behind. The examples accept any directory holding the
# four IDX files (plain or .gz), so files copied in by hand work too.
set -euo pipefail

dir="${1:-data/mnist}"
# EMBER_MNIST_MIRRORS (space-separated base URLs) replaces the list; the tests use it.
read -r -a mirrors <<<"${EMBER_MNIST_MIRRORS:-https://ossci-datasets.s3.amazonaws.com/mnist https://storage.googleapis.com/cvdf-datasets/mnist http://yann.lecun.com/exdb/mnist}"
declare -A md5=(
  [train-images-idx3-ubyte.gz]=f68b3c2dcbeaaa9fbdd348bbdeb94873
  [train-labels-idx1-ubyte.gz]=d53e105ee54ea40749a09fcbcd1e9432
  [t10k-images-idx3-ubyte.gz]=9fb629c4189551a2d022fa330f9573f3
  [t10k-labels-idx1-ubyte.gz]=ec29112dd5afa0611ce80d1b7f02629c
)

fetch() {  # url dest
  if command -v curl >/dev/null; then
    curl -fsSL --connect-timeout 10 --max-time 300 -o "$2" "$1"
  elif command -v wget >/dev/null; then
    wget -q --timeout=10 -O "$2" "$1"
  else
    echo "download-mnist: neither curl nor wget is installed" >&2
    return 1
  fi
}

mkdir -p "$dir"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  if [[ -f "$dir/$f" ]] && [[ "$(md5sum "$dir/$f" | cut -d' ' -f1)" == "${md5[$f]}" ]]; then
    echo "download-mnist: $f already present and verified"
    continue
  fi
  ok=0
  for m in "${mirrors[@]}"; do
    tmp="$(mktemp "$dir/.$f.XXXXXX")"
    if fetch "$m/$f" "$tmp" 2>/dev/null; then
      sum="$(md5sum "$tmp" | cut -d' ' -f1)"
      if [[ "$sum" == "${md5[$f]}" ]]; then
        mv "$tmp" "$dir/$f"
        echo "download-mnist: $f from $m (md5 ok)"
        ok=1
        break
      fi
      echo "download-mnist: $f from $m has md5 $sum, expected ${md5[$f]}; trying the next mirror" >&2
    fi
    rm -f "$tmp"
  done
  if [[ $ok -ne 1 ]]; then
    echo "download-mnist: could not download $f from any mirror (is this machine offline?)." >&2
    echo "download-mnist: copy the four MNIST files into $dir by hand, or train on Fashion-MNIST" >&2
    echo "download-mnist: (Debian package dataset-fashion-mnist, installed by scripts/setup.sh)." >&2
    exit 1
  fi
done
echo "download-mnist: MNIST is ready in $dir"
