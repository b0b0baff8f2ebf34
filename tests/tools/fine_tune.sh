#!/usr/bin/env bash
# ctest tools.fine_tune: --init-from and --init-skip.
#   1. mnist_cnn's checkpoint (10 classes) fine-tunes a model file's CNN with a 3-class head on
#      three classes' images: the head is left to its fresh initialisation, the other 8 tensors
#      load, and the run learns (held-out accuracy above 0.6 after one short epoch);
#   2. without --init-skip the head's shapes are refused, naming the tensor and both shapes; a
#      prefix that names nothing, a missing tensor (another network) and the flags' misuses are
#      errors that say so;
#   3. the examples take it too (mnist_cnn --init-from), and --resume auto goes on from the run's
#      own checkpoint rather than starting again from --init-from;
#   4. `ember eval` on the fine-tuned checkpoint reports the run's last test metrics.
# Usage: fine_tune.sh EMBER MNIST_CNN EVAL_TEST_DATA MODELS_DIR
set -euo pipefail
ember=$1 mnist_cnn=$2 test_data=$3 models=$4
work=$(mktemp -d "$PWD/fine_tune.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() {
  echo "FAIL: $*"
  tail -n 20 err 2>/dev/null || true
  exit 1
}

"$mnist_cnn" --limit 1024 --batch-size 32 --max-steps 32 --checkpoint-dir cnn >/dev/null 2>&1
"$test_data" pngs data/train 600 train 0,1,2 >/dev/null
"$test_data" pngs data/test 150 test 0,1,2 >/dev/null
# models/mnist_cnn.pbtxt (whose layers are named as models::MnistCnn's) on the image folders,
# with a 3-class head.
sed -e 's/out_features: 10/out_features: 3/' -e 's/name: "mnist_cnn"/name: "ft"/' \
  -e 's|mnist {}.*|image_folder { train: "data/train" test: "data/test" height: 28 width: 28 channels: 1 mean: 0.1307 std: 0.3081 }|' \
  "$models/mnist_cnn.pbtxt" >ft.pbtxt
grep -q 'out_features: 3' ft.pbtxt && grep -q image_folder ft.pbtxt

"$ember" train ft.pbtxt --epochs 1 --batch-size 32 --init-from cnn/mnist_cnn.ckpt --init-skip f2 \
  --checkpoint-dir ft >out 2>err || fail "fine-tuning failed"
grep 'Initialised' out
grep -q 'Initialised 8 tensors from cnn/mnist_cnn.ckpt; left freshly initialised: f2.weight f2.bias' out
acc=$(tail -n 1 ft/metrics.csv | cut -d, -f6)
echo "fine-tuned held-out accuracy: $acc"
awk -v a="$acc" 'BEGIN { exit !(a > 0.6) }'

# eval of the fine-tuned model: the recorded model file and classes, the run's last metrics.
trained=$(grep -o 'test loss [0-9.]* acc [0-9.]*' out | tail -n 1)
"$ember" eval ft/ft.ckpt >eval.out
cat eval.out
grep -qx "$trained" eval.out

expect_error() {  # STATUS REGEX ARGS...
  local want=$1 regex=$2
  shift 2
  local got=0
  "$@" >out 2>err || got=$?
  [ "$got" = "$want" ] || fail "$*: exit status $got, expected $want"
  grep -Eq -- "$regex" err || fail "$*: stderr does not match '$regex'"
}
expect_error 1 "'f2.weight': the model has \[3, 64\], the checkpoint \[10, 64\]" \
  "$ember" train ft.pbtxt --epochs 1 --init-from cnn/mnist_cnn.ckpt --checkpoint-dir bad1
expect_error 1 "--init-skip f9 names no tensor" \
  "$ember" train ft.pbtxt --epochs 1 --init-from cnn/mnist_cnn.ckpt --init-skip f2,f9 --checkpoint-dir bad2
expect_error 1 "missing: the model's 'f3.weight' \[10, 84\] is not in the checkpoint" \
  "$ember" train "$models/lenet5.pbtxt" --epochs 1 --init-from cnn/mnist_cnn.ckpt --checkpoint-dir bad3
grep -q "unexpected: the checkpoint's 'c3.weight' \[64, 64, 3, 3\] is not in the model" err ||
  fail "lenet5: no unexpected tensor named"
grep -q "'c1.weight': the model has \[6, 1, 5, 5\], the checkpoint \[32, 1, 3, 3\]" err || fail "lenet5: no shape named"
expect_error 2 "--init-skip goes with --init-from" "$mnist_cnn" --init-skip f2
expect_error 2 "--init-from starts a new run and --resume cnn/last.ckpt continues one" \
  "$mnist_cnn" --init-from cnn/mnist_cnn.ckpt --resume cnn/last.ckpt
expect_error 1 "--init-from /nonexistent.ckpt" "$mnist_cnn" --limit 64 --init-from /nonexistent.ckpt

"$mnist_cnn" --limit 256 --batch-size 32 --max-steps 2 --init-from cnn/mnist_cnn.ckpt --checkpoint-dir ex \
  --resume auto >out 2>err || fail "mnist_cnn --init-from"
grep -q 'Initialised 10 tensors from cnn/mnist_cnn.ckpt' out || fail "mnist_cnn did not say it initialised"
"$mnist_cnn" --limit 256 --batch-size 32 --max-steps 4 --init-from cnn/mnist_cnn.ckpt --checkpoint-dir ex \
  --resume auto >out 2>err || fail "mnist_cnn --init-from --resume auto"
grep -q 'Resumed from ex/last.ckpt at step 2' out || fail "no resume"
if grep -q Initialised out; then fail "a resumed run initialised from --init-from again"; fi
echo "fine-tuning works"
