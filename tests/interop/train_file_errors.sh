#!/usr/bin/env bash
# ctest tools.train_file_errors: what `ember train` and `ember export onnx --model-file` refuse in a
# model file the schema cannot, each with its exit status and a message that names the thing. The
# shipped files are edited by sed into each mistake. Usage: train_file_errors.sh EMBER MODELS_DIR
set -uo pipefail
ember=$1 models=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
# expect STATUS REGEX COMMAND...: the command exits with STATUS and its stderr matches REGEX.
expect() {
  local status=$1 regex=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  if [[ $got != "$status" ]] || ! grep -qE -- "$regex" "$dir/err"; then
    echo "FAIL: $* exited $got (expected $status) with:"
    cat "$dir/err"
    failures=$((failures + 1))
  fi
}
edit() {  # edit NAME SOURCE SED-EXPRESSION: a copy of SOURCE with one mistake
  sed "$3" "$models/$2" >"$dir/$1.pbtxt"
  cmp -s "$models/$2" "$dir/$1.pbtxt" && echo "FAIL: the edit for $1 changed nothing" && failures=$((failures + 1))
}
edit gan_noise mlp_gan.pbtxt 's/noise_dim: 100/noise_dim: 64/'
expect 1 "mlp_gan|gan_noise.pbtxt:[0-9]+: the generator's input_shape is \[100\] \(expected \[noise_dim\] = \[64\]\)" \
  "$ember" train "$dir/gan_noise.pbtxt"
edit gan_schedule mlp_gan.pbtxt 's/generator_solver { adam { lr: 0.0002 beta1: 0.5 } }/generator_solver { adam { lr: 0.0002 beta1: 0.5 } step_lr { step_size: 1 gamma: 0.5 } }/'
expect 1 "step_lr in a GAN's solver is not supported yet" "$ember" train "$dir/gan_schedule.pbtxt"
edit gan_csv mlp_gan.pbtxt 's/mnist { mean: 0.5 std: 0.5 }/csv { train: "a.csv" test: "b.csv" }/'
expect 1 "a GAN trains on MNIST-format images" "$ember" train "$dir/gan_csv.pbtxt"
edit lm_shape lstm_lm.pbtxt 's/input_shape: \[100\]/input_shape: [50]/'
expect 1 "network 'net' must take input_shape \[seq_len\] = \[100\]" "$ember" train "$dir/lm_shape.pbtxt"
edit lm_level lstm_lm.pbtxt 's/level: "char"/level: "byte"/'
expect 1 "data.text.level is 'byte' \(expected char or word\)" "$ember" train "$dir/lm_level.pbtxt"
edit lm_seq lstm_lm.pbtxt 's/ seq_len: 100//'
expect 1 "data.text.seq_len is missing" "$ember" train "$dir/lm_seq.pbtxt"
edit augment mnist_cnn.pbtxt 's/  batch_size: 64/  batch_size: 64\n  augment { crop_padding: -1 }/'
expect 1 "augment.pbtxt:25: data.augment.crop_padding is -1 \(invalid: expected 0 to 1024 pixels\)" "$ember" train "$dir/augment.pbtxt" --limit 64 --checkpoint-dir ''
# Numbers a file gives out of range are invalid, on their own lines: never read as left out (an
# epochs of 0 once trained 1 epoch, a batch_size of 0 trained batches of 64), never blamed on a flag
# with the flag list (a rate of 1e400 once was).
edit lr_inf mnist_cnn.pbtxt 's/adam { lr: 0.001 }/adam { lr: 1e400 }/'
expect 1 "lr_inf.pbtxt:27: classifier.solver.adam.lr is inf \(invalid: expected a finite rate > 0\)" \
  "$ember" train "$dir/lr_inf.pbtxt"
grep -q -- "--batch-size" "$dir/err" && echo "FAIL: the file's rate was blamed on a flag:" && cat "$dir/err" &&
  failures=$((failures + 1))
edit epochs0 mnist_cnn.pbtxt 's/epochs: 5/epochs: 0/'
expect 1 "epochs0.pbtxt:30: training.epochs is 0 \(invalid" "$ember" train "$dir/epochs0.pbtxt"
edit batch0 mnist_cnn.pbtxt 's/batch_size: 64/batch_size: 0/'
expect 1 "batch0.pbtxt:24: data.batch_size is 0 \(invalid" "$ember" train "$dir/batch0.pbtxt"
edit workers mnist_cnn.pbtxt 's/batch_size: 64/batch_size: 64 workers: -2/'
expect 1 "workers.pbtxt:24: data.workers is -2 \(invalid" "$ember" train "$dir/workers.pbtxt" --limit 64
edit channels mnist_cnn.pbtxt 's/out_channels: 32/out_channels: -3/'
expect 1 "channels.pbtxt:9: network 'net', layer 'c1' \(conv2d\): out_channels is -3 \(invalid" \
  "$ember" train "$dir/channels.pbtxt" --summary
# An input_shape far too large: refused naming it and the data's shape, or, for --summary, naming
# the network (not the allocator's "out of memory" alone).
edit huge mnist_cnn.pbtxt 's/input_shape: \[1, 28, 28\]/input_shape: [100000, 100000, 7840]/'
expect 1 "network 'net' takes examples of \[100000, 100000, 7840\], but .* gives \[1, 28, 28\]" \
  "$ember" train "$dir/huge.pbtxt" --limit 64 --checkpoint-dir ''
expect 1 "huge.pbtxt:6: network 'net': one example of input_shape \[100000, 100000, 7840\] cannot be made" \
  "$ember" train "$dir/huge.pbtxt" --summary
# concat {} joins channels: the residual network with its sum made a concatenation has 64 channels
# after the join (the summary's next layer, relu2), and its batch stays 1 (a join of the batch made
# [2, 32, 14, 14]).
edit concat residual_cnn.pbtxt 's/name: "sum" add {}/name: "sum" concat {}/'
"$ember" train "$dir/concat.pbtxt" --summary >"$dir/out" 2>"$dir/err"
if ! grep -E "^relu2 .*\[1, 64, 14, 14\]" "$dir/out" >/dev/null; then
  echo "FAIL: concat {} did not join the channels:" && cat "$dir/out" "$dir/err"
  failures=$((failures + 1))
fi
# The export's own flags.
expect 2 "--network: .* has no network 'nope'" "$ember" export onnx x.ckpt --model-file "$models/mlp_gan.pbtxt" \
  --network nope -o "$dir/x.onnx"
expect 2 "--network goes with --model-file" "$ember" export onnx x.ckpt --model mnist_cnn --network g -o "$dir/x.onnx"
# Runtime errors (a folder that cannot be written) end with status 1 and without the flag list.
expect 1 "cannot write to --checkpoint-dir '/proc/self'" "$ember" train "$models/mnist_cnn.pbtxt" --limit 64 \
  --checkpoint-dir /proc/self
grep -q '^Flags:' "$dir/err" && echo "FAIL: the flag list follows a runtime error" && failures=$((failures + 1))
# -o naming the checkpoint (or the model file) being exported is refused, and the file is left
# alone: it once replaced the trained checkpoint with the ONNX model.
"$ember" train "$models/mnist_cnn.pbtxt" --limit 64 --max-steps 1 --checkpoint-dir "$dir/run" >/dev/null
cp "$dir/run/mnist_cnn.ckpt" "$dir/trained.ckpt"
cp "$models/mnist_cnn.pbtxt" "$dir/model.pbtxt"
expect 1 "-o .*/mnist_cnn.ckpt: is the input file" "$ember" export onnx "$dir/run/mnist_cnn.ckpt" \
  --model-file "$dir/model.pbtxt" -o "$dir/run/./mnist_cnn.ckpt"
expect 1 "-o .*model.pbtxt: is the input file" "$ember" export onnx "$dir/run/mnist_cnn.ckpt" \
  --model-file "$dir/model.pbtxt" -o "$dir/model.pbtxt"
cmp -s "$dir/run/mnist_cnn.ckpt" "$dir/trained.ckpt" || { echo "FAIL: the checkpoint was overwritten"; failures=$((failures + 1)); }
cmp -s "$models/mnist_cnn.pbtxt" "$dir/model.pbtxt" || { echo "FAIL: the model file was overwritten"; failures=$((failures + 1)); }
echo "train_file_errors: $failures failure(s)"
((failures == 0))
