#!/usr/bin/env bash
# ctest tools.eval_predict_model_files: `ember eval` and `ember predict` on checkpoints of
# `ember train FILE` with CSV and image-folder data (train_file_data's blobs and squares).
#   1. eval of NAME.ckpt and last.ckpt prints the run's last test metrics (the model file the
#      checkpoint records, its data read as the training read them);
#   2. predict on the CSV test file agrees with eval (accuracy), and the same rows without their
#      label column give the same probabilities;
#   3. predict on the image test folder agrees with eval and names the classes (the folders);
#   4. a model file that has moved is named, and --model-file finds it.
# Usage: eval_predict_files.sh TRAIN_FILE_DATA EMBER
set -euo pipefail
make_data=$1 ember=$2
work=$(mktemp -d "$PWD/eval_predict_files.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
"$make_data" data

# Accuracy of predict's JSON against LABELS (one per line, in the inputs' order).
json_accuracy() {
  awk 'NR == FNR { label[NR] = $1; next }
       /"input":/ { match($0, /"index": [0-9]+/); n++; correct += (substr($0, RSTART + 9, RLENGTH - 9) == label[n]) }
       END { printf "acc %.4f\n", correct / n }' "$1" "$2"
}

"$ember" train data/csv.pbtxt --epochs 1 --checkpoint-dir run_csv >train.out
trained=$(grep -o 'test loss [0-9.]* acc [0-9.]*' train.out | tail -n 1)
echo "ember train: $trained"
for ckpt in run_csv/blobs.ckpt run_csv/last.ckpt; do
  "$ember" eval $ckpt >eval.out
  cat eval.out
  grep -qx "$trained" eval.out
done
"$ember" predict run_csv/blobs.ckpt --input data/blobs_test.csv --format json >labelled.json
tail -n +2 data/blobs_test.csv | cut -d, -f5 >labels.txt
[ "acc ${trained##* acc }" = "$(json_accuracy labels.txt labelled.json)" ]
cut -d, -f1-4 data/blobs_test.csv >rows.csv
"$ember" predict run_csv/blobs.ckpt --input rows.csv --format json >rows.json
diff <(sed 's/"input": "[^"]*"//' labelled.json) <(sed 's/"input": "[^"]*"//' rows.json)
"$ember" predict run_csv/blobs.ckpt --input rows.csv | head -n 3

"$ember" train data/images.pbtxt --epochs 1 --checkpoint-dir run_img >train.out
trained=$(grep -o 'test loss [0-9.]* acc [0-9.]*' train.out | tail -n 1)
echo "ember train: $trained"
"$ember" eval run_img/squares.ckpt >eval.out
cat eval.out
grep -qx "$trained" eval.out
"$ember" predict run_img/squares.ckpt --input data/images/test --format json >images.json
grep -q '"classes": \["bright", "dark"\]' images.json
grep -o '"input": "[^"]*"' images.json | sed -e 's|.*/test/bright/.*|0|' -e 's|.*/test/dark/.*|1|' >labels.txt
[ "acc ${trained##* acc }" = "$(json_accuracy labels.txt images.json)" ]

mv data/images.pbtxt data/moved.pbtxt
if "$ember" eval run_img/squares.ckpt 2>err.txt; then
  echo "a moved model file went unnoticed"
  exit 1
fi
grep -q "it was trained from the model file .*images.pbtxt, which is not there now: pass --model-file" err.txt
"$ember" eval run_img/squares.ckpt --model-file data/moved.pbtxt >moved.out
grep -qx "$trained" moved.out
# A --data folder with a class the model does not know is refused naming it and the model's
# classes (a label numbered by the folder's own listing would score the wrong class).
mkdir -p data/other/cat
cp -r data/images/test/dark data/other/
cp "$(find data/images/test/bright -type f -print -quit)" data/other/cat/
if "$ember" eval run_img/squares.ckpt --model-file data/moved.pbtxt --data data/other 2>err.txt >/dev/null; then
  echo "a --data class the model lacks was accepted"
  exit 1
fi
grep -q "its class folder 'cat' is none of the model's classes (bright, dark) nor a class number below 2" err.txt
echo "eval and predict read ember train's CSV and image-folder checkpoints as the training did"
