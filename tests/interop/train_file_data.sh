#!/usr/bin/env bash
# ctest tools.train_data_sources: `ember train` on a CSV source and an image-folder source (the data
# and model files written by train_file_data), each learning its easy task: the last held-out
# accuracy in its metrics.csv must pass 0.9. Usage: train_file_data.sh TRAIN_FILE_DATA EMBER
set -euo pipefail
make_data=$1 ember=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$make_data" "$dir"
for model in csv images; do
  "$ember" train "$dir/$model.pbtxt" --checkpoint-dir "$dir/run_$model" >"$dir/$model.out"
  tail -n 2 "$dir/$model.out"
  acc=$(tail -n 1 "$dir/run_$model/metrics.csv" | cut -d, -f6)
  echo "$model: held-out accuracy $acc"
  awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }'
done
# A network whose input_shape does not match the data is refused, naming both.
sed 's/input_shape: \[4\]/input_shape: [5]/' "$dir/csv.pbtxt" >"$dir/wrong.pbtxt"
if "$ember" train "$dir/wrong.pbtxt" --checkpoint-dir "$dir/run_wrong" 2>"$dir/wrong.err"; then
  echo "a wrong input_shape was accepted"
  exit 1
fi
grep -q "takes examples of \[5\], but the CSV file .* gives \[4\]" "$dir/wrong.err"
