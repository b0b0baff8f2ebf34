#!/usr/bin/env bash
# ctest interop.onnxruntime: exports the cases (onnx_cases), then `ember export onnx` on three model
# files (one through its model file, --model-file), and has ONNX's checker and onnxruntime read them all back (onnxruntime_check.py).
# Usage: onnxruntime_check.sh ONNX_CASES EMBER PYTHON SOURCE_DIR
set -euo pipefail
cases=$1 ember=$2 python=$3 source=$4
here=$(cd "$(dirname "$0")" && pwd)
if ! "$python" -c 'import numpy, onnx, onnxruntime' 2>/dev/null; then
  echo "skipped: $python lacks numpy, onnx or onnxruntime (scripts/setup.sh installs them into .venv/)"
  exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cases" "$dir"
# The command line on the model files the cases saved, checked against the same outputs.
"$ember" export onnx "$dir/mnist_cnn.ckpt" --model mnist_cnn -o "$dir/cli_mnist_cnn.onnx"
"$ember" export onnx "$dir/lstm_lm.ckpt" --model lstm_lm -o "$dir/cli_lstm_lm.onnx" --batch 3 --seq-len 4
"$ember" export onnx "$dir/residual_cnn.ckpt" --model-file "$source/models/residual_cnn.pbtxt" -o "$dir/cli_residual_cnn.onnx"
sed -nE 's/^(mnist_cnn|lstm_lm|residual_cnn) [^ ]+\.onnx /cli_\1 cli_\1.onnx /p' "$dir/manifest.txt" >"$dir/cli_manifest.txt"
"$python" "$here/onnxruntime_check.py" "$dir"
"$python" "$here/onnxruntime_check.py" "$dir" cli_manifest.txt
