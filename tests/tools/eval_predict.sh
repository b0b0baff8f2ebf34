#!/usr/bin/env bash
# ctest tools.eval_predict: `ember eval` and `ember predict` on mnist_cnn's checkpoints.
#   1. eval of last.ckpt and of mnist_cnn.ckpt prints the test loss and accuracy that mnist_cnn
#      printed for the same weights and test set, to the digit;
#   2. eval of the same test images written as PNG files (class folders) gives them again: the
#      images are read as training read MNIST;
#   3. predict's probabilities for those files agree with eval: its accuracy and its mean
#      cross-entropy are eval's (to 4 decimals);
#   4. the table names the classes the checkpoint records;
#   5. a checkpoint of the older kind (weights alone) needs --model, then gives the same numbers and
#      says what it lacked (normalisation: the example's; class names: numbered).
# Runs in a fresh folder (no data/mnist there: Fashion-MNIST, as the examples fall back to).
# Usage: eval_predict.sh EMBER MNIST_CNN EVAL_TEST_DATA
set -euo pipefail
ember=$1 mnist_cnn=$2 test_data=$3
work=$(mktemp -d "$PWD/eval_predict.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"

"$mnist_cnn" --limit 256 --batch-size 32 --max-steps 6 --checkpoint-dir cnn >train.out 2>train.err
trained=$(grep -o 'test loss [0-9.]* acc [0-9.]*' train.out | tail -n 1)
echo "mnist_cnn: $trained"
[ -n "$trained" ]
for ckpt in cnn/last.ckpt cnn/mnist_cnn.ckpt; do
  "$ember" eval $ckpt --limit 256 >eval.out
  cat eval.out
  grep -qx "$trained" eval.out
done

"$test_data" pngs pngs 256 test >/dev/null
"$ember" eval cnn/mnist_cnn.ckpt --data pngs >png.out
cat png.out
grep -qx "$trained" png.out

"$ember" predict cnn/mnist_cnn.ckpt --input pngs --format json >predict.json
# Each prediction is one line: its file's folder is the label; its probabilities give the
# cross-entropy of that label.
agreed=$(awk '/"input":/ {
    match($0, /"input": "[^"]*"/); path = substr($0, RSTART + 10, RLENGTH - 11)
    n = split(path, parts, "/"); label = parts[n - 1]
    match($0, /"index": [0-9]+/); best = substr($0, RSTART + 9, RLENGTH - 9)
    match($0, /"probabilities": \[[^]]*\]/); split(substr($0, RSTART + 18, RLENGTH - 19), p, ", ")
    total++; correct += (best == label); nll -= log(p[label + 1])
  } END { printf "test loss %.4f acc %.4f\n", nll / total, correct / total }' predict.json)
echo "predict: $agreed ($(grep -c '"input":' predict.json) images)"
[ "$agreed" = "$trained" ]

"$ember" predict cnn/mnist_cnn.ckpt --input pngs/0 --top 2 >table.out
head -n 3 table.out
grep -q '^input  *class (probability), then the next' table.out
grep -Eq 'T-shirt/top|Trouser|Pullover|Dress|Coat|Sandal|Shirt|Sneaker|Bag|Ankle boot|^[^ ]+ +[0-9] \(' table.out

"$test_data" old-checkpoint cnn/mnist_cnn.ckpt old.ckpt
if "$ember" eval old.ckpt --limit 256 >/dev/null 2>old.err; then
  echo "a checkpoint that records no model was evaluated"
  exit 1
fi
grep -q "old.ckpt: it records no model .*: pass --model mnist_cnn (or lenet5) or --model-file" old.err
"$ember" eval old.ckpt --model mnist_cnn --limit 256 >old.out 2>old.err
cat old.err
grep -qx "$trained" old.out
grep -q "note: old.ckpt records no input normalisation (written before checkpoints recorded it): using the example's" old.err
grep -q "note: old.ckpt records no class names (written before checkpoints recorded it): classes are numbered" old.err
# Into a file, not a pipe: grep -q stops reading at its match, and predict, still writing, would
# die of SIGPIPE (status 141 under pipefail: the test failed now and then).
"$ember" predict old.ckpt --model mnist_cnn --input pngs/0 --format json >old.json 2>/dev/null
grep -q '"classes": \["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"\]' old.json
echo "eval and predict agree with mnist_cnn's own test metrics"
