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
# The classifier's loss: label smoothing changes the training loss; class weights of the wrong
# length are refused by name.
sed 's/classifier { solver { sgd { lr: 0.1 momentum: 0.9 } } }/classifier { solver { sgd { lr: 0.1 momentum: 0.9 } } loss { label_smoothing: 0.2 class_weight: [1, 2] } }/' \
  "$dir/csv.pbtxt" >"$dir/smooth.pbtxt"
grep -q label_smoothing "$dir/smooth.pbtxt"
"$ember" train "$dir/smooth.pbtxt" --checkpoint-dir "$dir/run_smooth" --epochs 1 >/dev/null
plain=$(sed -n 2p "$dir/run_csv/metrics.csv" | cut -d, -f3) smooth=$(sed -n 2p "$dir/run_smooth/metrics.csv" | cut -d, -f3)
echo "first epoch's training loss: plain $plain, smoothed and weighted $smooth"
[ "$plain" != "$smooth" ]
sed 's/class_weight: \[1, 2\]/class_weight: [1, 2, 3]/' "$dir/smooth.pbtxt" >"$dir/weights3.pbtxt"
if "$ember" train "$dir/weights3.pbtxt" --checkpoint-dir "$dir/run_w3" --epochs 1 2>"$dir/w3.err" >/dev/null; then
  echo "3 class weights for 2 classes were accepted"
  exit 1
fi
grep -qi "weight" "$dir/w3.err"
# A class label the network has no output for is refused naming the CSV file, its line and the
# network, before training (it failed inside cross_entropy, naming neither).
sed 's/name: "fc2" linear { out_features: 2 }/name: "fc2" linear { out_features: 1 }/' "$dir/csv.pbtxt" >"$dir/few.pbtxt"
if "$ember" train "$dir/few.pbtxt" --checkpoint-dir "$dir/run_few" --epochs 1 2>"$dir/few.err" >/dev/null; then
  echo "a network of 1 output was accepted for 2 classes"
  exit 1
fi
grep -q "CSV '.*blobs_train.csv' line [0-9]* holds class label 1, but network 'net' (.*few.pbtxt:3) scores 1 classes" \
  "$dir/few.err" || { cat "$dir/few.err"; exit 1; }
# A test image folder is labelled by the training folder's classes (issue 48): one holding only
# 'dark' (training's second class) scores as well as the whole test set; numbered by its own
# subfolders it once scored 0 with status 0. A test class the training folder lacks is refused,
# naming both lists (an empty 'cat' once failed as "target 2 is out of range", naming no file).
mkdir -p "$dir/images/test_dark" "$dir/images/test_cat/cat"
cp -r "$dir/images/test/dark" "$dir/images/test_dark/"
cp -r "$dir/images/test/dark" "$dir/images/test/bright" "$dir/images/test_cat/"
sed 's#test: "images/test"#test: "images/test_dark"#' "$dir/images.pbtxt" >"$dir/images_dark.pbtxt"
"$ember" train "$dir/images_dark.pbtxt" --checkpoint-dir "$dir/run_dark" >/dev/null
acc=$(tail -n 1 "$dir/run_dark/metrics.csv" | cut -d, -f6)
echo "images, test set of the 'dark' class only: held-out accuracy $acc"
awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }'
sed 's#test: "images/test"#test: "images/test_cat"#' "$dir/images.pbtxt" >"$dir/images_cat.pbtxt"
if "$ember" train "$dir/images_cat.pbtxt" --checkpoint-dir "$dir/run_cat" >/dev/null 2>"$dir/cat.err"; then
  echo "a test class the training folder lacks was accepted"
  exit 1
fi
grep -q "test_cat' has classes \[bright, cat, dark\], but the training set's are \[bright, dark\]: 'cat'" "$dir/cat.err"
# A resume compares the file's settings as it compares the flags (issue 48): an optimizer setting
# changed (the checkpoint's value once won) or a layer added without weights (a dropout) is
# refused, naming the setting with its old and new values; the same file resumes.
sed 's/training { epochs: 4 seed: 3 }/training { epochs: 1 seed: 3 }/' "$dir/csv.pbtxt" >"$dir/r.pbtxt"
"$ember" train "$dir/r.pbtxt" --checkpoint-dir "$dir/run_r" >/dev/null
sed 's/momentum: 0.9 }/momentum: 0.9 weight_decay: 5 }/' "$dir/r.pbtxt" >"$dir/r_decay.pbtxt"
if "$ember" train "$dir/r_decay.pbtxt" --checkpoint-dir "$dir/run_r" --resume auto --epochs 2 >/dev/null 2>"$dir/r.err"; then
  echo "a resume with another weight_decay was accepted"
  exit 1
fi
grep -q "classifier.solver.sgd.weight_decay 0 (now 5)" "$dir/r.err"
sed 's/  layer { name: "relu" relu {} }/  layer { name: "relu" relu {} }\n  layer { name: "drop" dropout { p: 0.5 } }/' \
  "$dir/r.pbtxt" >"$dir/r_drop.pbtxt"
if "$ember" train "$dir/r_drop.pbtxt" --checkpoint-dir "$dir/run_r" --resume auto --epochs 2 >/dev/null 2>"$dir/r.err"; then
  echo "a resume with a dropout layer added was accepted"
  exit 1
fi
grep -q "network.net.layers \[.*\] (now \[.*name: \"drop\" dropout { p: 0.5 }.*\])" "$dir/r.err"
"$ember" train "$dir/r.pbtxt" --checkpoint-dir "$dir/run_r" --resume auto --epochs 2 >"$dir/r.out"
grep -q "Resumed from" "$dir/r.out"
# The file's checkpoint_dir and tensorboard are relative to the file, as its data paths are, not
# to the working directory (issue 48).
sed 's/training { epochs: 4 seed: 3 }/training { epochs: 1 seed: 3 checkpoint_dir: "rel_run" tensorboard: "rel_tb" }/' \
  "$dir/csv.pbtxt" >"$dir/rel.pbtxt"
mkdir "$dir/elsewhere"
(cd "$dir/elsewhere" && "$ember" train ../rel.pbtxt >/dev/null)
test -s "$dir/rel_run/last.ckpt" && test -d "$dir/rel_tb" && test ! -e "$dir/elsewhere/rel_run"
echo "train_file_data: ok"
