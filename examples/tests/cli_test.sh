#!/usr/bin/env bash
# cli_test.sh CASE BIN_DIR: what a user sees from the example programs in BIN_DIR, one case per
# ctest entry (examples/CMakeLists.txt). Each case runs in a fresh folder (no data/mnist there,
# so a run without --data trains on Debian's Fashion-MNIST) on a few hundred examples. Nothing
# here depends on timing: a run is stopped by --max-steps, or killed once a file it writes
# after the output under test exists.
set -u
case_name=$1
bin=$(cd "$2" && pwd)
work=$(mktemp -d "$PWD/cli_${case_name}.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fashion=/usr/share/datasets/fashion-mnist

fail() {
  echo "FAIL ($case_name): $*"
  for f in out err; do [ -s $f ] && { echo "--- $f:"; tail -n 30 $f; }; done
  exit 1
}
# expect STATUS REGEX PROGRAM ARGS...: runs PROGRAM (stdout to out, stderr to err) and checks its
# exit status and that stdout+stderr match the extended REGEX.
expect() {
  local want=$1 regex=$2 prog=$3
  shift 3
  "$bin/$prog" "$@" >out 2>err
  local got=$?
  [ "$got" = "$want" ] || fail "$prog $*: exit status $got, expected $want"
  [ -z "$regex" ] || cat out err | grep -Eq -- "$regex" || fail "$prog $*: output does not match '$regex'"
  # The flag list follows usage errors (status 2) only: after any other error it would push the
  # message off the screen.
  [ "$want" = 2 ] || ! grep -q '^Flags:' err || fail "$prog $*: the flag list follows an error that is not a usage error"
}
# The value of column NAME in the last row of CSV file FILE.
last_value() {
  awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) if ($i == name) c = i; next } { v = $c } END { print v }' "$1"
}
small=(--limit 256 --batch-size 32)

case $case_name in
# Item 2: an epoch resumed mid-way reports the whole epoch (the loss and accuracy sums travel in
# the checkpoint): 3 steps, a checkpoint, the other 5 steps equal 8 steps in one go, and the log
# holds the epoch once.
resume_sums_classifier)
  for prog in custom_model mnist_cnn; do
    rm -rf a b
    expect 0 "" $prog "${small[@]}" --epochs 1 --checkpoint-dir a --log a/metrics.csv
    expect 0 "" $prog "${small[@]}" --epochs 1 --checkpoint-dir b --log b/metrics.csv --max-steps 3
    expect 0 "Resumed from b/last.ckpt" $prog "${small[@]}" --epochs 1 --checkpoint-dir b --log b/metrics.csv --resume auto
    for col in train_loss train_acc test_loss; do
      x=$(last_value a/metrics.csv $col) y=$(last_value b/metrics.csv $col)
      echo "$prog $col: straight $x, resumed $y"
      [ -n "$x" ] && [ "$x" = "$y" ] || fail "$prog: $col of the resumed epoch is $y, straight $x"
    done
    [ "$(wc -l <b/metrics.csv)" = 2 ] || fail "$prog: the resumed log has $(wc -l <b/metrics.csv) lines, expected header + 1"
  done
  ;;
resume_sums_gan)
  expect 0 "" mnist_gan "${small[@]}" --epochs 1 --checkpoint-dir a
  x=$(grep '^epoch 1:' out | cut -d'|' -f1)
  expect 0 "" mnist_gan "${small[@]}" --epochs 1 --checkpoint-dir b --max-steps 3
  expect 0 "" mnist_gan "${small[@]}" --epochs 1 --checkpoint-dir b --resume auto
  y=$(grep '^epoch 1:' out | cut -d'|' -f1)
  echo "straight: $x; resumed: $y"
  [ -n "$x" ] && [ "$x" = "$y" ] || fail "the resumed epoch's losses differ from the straight run's"
  ;;
# Item 3: a resume with another --lr, --seed or --data is refused, naming each difference.
resume_settings)
  mkdir same_files && ln -s $fashion/* same_files/
  expect 0 "" mnist_cnn "${small[@]}" --epochs 1 --max-steps 2 --checkpoint-dir c
  expect 1 "--lr 0.001 \(now 0.01\)" mnist_cnn "${small[@]}" --epochs 1 --checkpoint-dir c --resume auto --lr 0.01
  expect 1 "--seed 0 \(now 5\)" mnist_cnn "${small[@]}" --epochs 1 --checkpoint-dir c --resume auto --seed 5
  expect 1 "--data $fashion \(now .*same_files\)" mnist_cnn "${small[@]}" --epochs 1 --checkpoint-dir c --resume auto \
    --data same_files
  expect 0 "at step 2" mnist_cnn "${small[@]}" --epochs 1 --max-steps 3 --checkpoint-dir c --resume auto
  expect 0 "" mnist_gan "${small[@]}" --epochs 1 --max-steps 2 --checkpoint-dir g
  expect 1 "--lr 0.0002 \(now 0.001\), --seed 0 \(now 1\)" mnist_gan "${small[@]}" --epochs 1 --checkpoint-dir g \
    --resume auto --lr 1e-3 --seed 1
  ;;
# Item 4: Fashion-MNIST stands in only when --data is left out (its notice on stderr); a --data
# that lacks the files is an error that says what is missing.
wrong_data)
  mkdir empty partial && ln -s $fashion/train-* partial/
  expect 1 "--data '/nonexistent' does not exist" mnist_cnn --data /nonexistent --limit 64
  expect 1 "--data 'empty' lacks train-images-idx3-ubyte\[.gz\], train-labels-idx1-ubyte\[.gz\], t10k" mnist_cnn \
    --data empty --limit 64
  expect 1 "--data '/etc/passwd' is not a folder" mnist_cnn --data /etc/passwd --limit 64
  expect 1 "--data 'partial' lacks t10k-images-idx3-ubyte\[.gz\], t10k-labels-idx1-ubyte\[.gz\] \(of" mnist_cnn \
    --data partial --limit 64
  expect 1 "--data 'empty' lacks" custom_model --data empty --limit 64 --checkpoint-dir ''
  # Naming the default folder is giving --data: no fallback either.
  mkdir -p data/mnist
  expect 1 "--data 'data/mnist' lacks train-images" mnist_cnn --data data/mnist --limit 64
  expect 0 "nothing to train" mnist_cnn --limit 64 --max-steps 0
  grep -q "Training on Fashion-MNIST from $fashion instead" err || fail "the fallback notice is not on stderr"
  ! grep -q "instead" out || fail "the fallback notice is on stdout"
  expect 0 "nothing to train" mnist_cnn --data $fashion --limit 64 --max-steps 0
  ! grep -q "instead" err || fail "a --data holding the files printed the fallback notice"
  ;;
# Item 14: bad data leave no --checkpoint-dir behind.
no_dir_on_bad_data)
  for prog in mnist_gan mnist_dcgan custom_model mnist_cnn; do
    expect 1 "--data '/nonexistent' does not exist" $prog --data /nonexistent --checkpoint-dir out_$prog
    [ ! -e out_$prog ] || fail "$prog left its --checkpoint-dir behind"
  done
  ;;
# Item 5: a metrics log that cannot be written is an error naming the file.
log_write_error)
  for prog in mnist_cnn custom_model mnist_gan; do
    expect 1 "writing '/dev/full' failed" $prog --limit 64 --batch-size 32 --epochs 1 --max-steps 1 --log /dev/full \
      --checkpoint-dir ''
  done
  ;;
# Item 6: an existing folder that cannot be written is refused before training (status 1 and no
# flag list: the flags are fine, the folder is not).
unwritable_checkpoint_dir)
  for prog in mnist_cnn custom_model mnist_gan; do
    expect 1 "cannot write to --checkpoint-dir '/proc/self'" $prog --limit 64 --max-steps 1 --checkpoint-dir /proc/self
  done
  ;;
# Item 7: --limit is -1 or >= 1 and --max-steps -1 or >= 0, in every example.
limits)
  for prog in mnist_cnn custom_model mnist_gan mnist_dcgan lstm_lm bilstm_classify; do
    expect 2 "--limit expects -1 \(all\) or an integer >= 1, got 0" $prog --limit 0
    expect 2 "--limit expects -1 \(all\) or an integer >= 1, got -2" $prog --limit -2
    expect 2 "--max-steps expects -1 \(no limit\) or an integer >= 0, got -5" $prog --max-steps -5
  done
  ;;
# Item 8: a resume drops the log rows written after its checkpoint (a run killed between its
# log and its checkpoint writes them again), and a fresh run into a folder with a checkpoint is
# refused unless --overwrite, which restarts the log.
csv_after_kill)
  gan=(mnist_gan "${small[@]}" --epochs 1 --log-every 1 --checkpoint-dir k)
  expect 0 "" "${gan[@]}" --max-steps 3
  cp k/last.ckpt saved.ckpt
  expect 0 "" "${gan[@]}" --max-steps 5 --resume auto
  cp saved.ckpt k/last.ckpt  # as if killed after the rows of steps 4 and 5, before their checkpoint
  expect 0 "Resumed from k/last.ckpt" "${gan[@]}" --max-steps 6 --resume auto
  steps=$(cut -d, -f2 k/metrics.csv | tail -n +2 | tr '\n' ' ')
  [ "$steps" = "1 2 3 4 5 6 " ] || fail "metrics.csv steps after the resume: $steps"
  expect 1 "--checkpoint-dir 'k' already holds a checkpoint \(last.ckpt\): pass --resume auto" "${gan[@]}" --max-steps 2
  expect 0 "" "${gan[@]}" --max-steps 2 --overwrite
  steps=$(cut -d, -f2 k/metrics.csv | tail -n +2 | tr '\n' ' ')
  [ "$steps" = "1 2 " ] || fail "metrics.csv steps after --overwrite: $steps"
  ;;
# Item 9: the epoch summary is flushed before the checkpoint is written, so a SIGKILL right after
# the checkpoint appears cannot lose it (stdout a file, as under `sched logs`).
summary_flushed)
  for prog in mnist_cnn custom_model; do
    rm -rf f
    "$bin/$prog" --limit 512 --batch-size 32 --epochs 50 --checkpoint-dir f >out 2>err &
    pid=$!
    while [ ! -e f/last.ckpt ] && kill -0 $pid 2>/dev/null; do sleep 0.01; done
    kill -9 $pid
    wait $pid 2>/dev/null
    grep -q '^epoch 1:' out || fail "$prog: the summary of epoch 1 was not in its output when its checkpoint was"
  done
  ;;
# Item 9: the progress lines carry the whole run's ETA beside the epoch's while epochs remain:
# every epoch-1 line of a 2-epoch run has it, the last epoch's lines do not (values not checked).
run_eta)
  for prog in mnist_cnn custom_model mnist_gan; do
    expect 0 "" $prog "${small[@]}" --epochs 2
    grep -E '^epoch 1/2 [0-9]+/[0-9]+ .*\| ETA [0-9]+:[0-9]{2}, run [0-9]+:[0-9]{2}$' out >/dev/null ||
      fail "$prog: no run ETA on epoch 1's progress lines"
    if grep -E '^epoch 1/2 [0-9]+/[0-9]+ ' out | grep -qv ', run '; then fail "$prog: an epoch-1 line without the run ETA"; fi
    if grep -E '^epoch 2/2 [0-9]+/[0-9]+ ' out | grep -q ', run '; then fail "$prog: a run ETA on the last epoch"; fi
  done
  ;;
# Item 10: usage errors: exit status 2, the message says what is wrong with which flag, and the
# whole flag list follows.
usage_errors)
  expect 2 "--epochs expects an integer, got 'abc'" mnist_cnn --epochs abc
  grep -q -- '--reshard' err || fail "the flag list stops before the last flag"
  expect 2 "--lr expects a finite number, got 'x'" custom_model --lr x
  grep -q -- '--log ' err || fail "the flag list stops before the last flag"
  expect 2 "--epochs needs a value" mnist_cnn --epochs
  expect 2 "--epochs needs a value" custom_model --epochs --limit 5
  expect 2 "--batch-size expects an integer >= 1, got 0" mnist_cnn --batch-size 0
  expect 2 "--lr expects a number > 0, got -1" mnist_gan --lr -1
  expect 2 "--seq-len expects an integer >= 1, got 0" lstm_lm --seq-len 0
  for prog in mnist_cnn custom_model lstm_lm bilstm_classify; do
    expect 2 "--device expects auto, cpu, cuda or cuda:N, got 'tpu'" $prog --device tpu
  done
  expect 2 "--test-fraction expects a number in \(0, 1\), got 1.5" lstm_lm --test-fraction 1.5
  expect 2 "--test-fraction expects a number in \(0, 1\), got 0" bilstm_classify --test-fraction 0
  expect 2 "--resume auto needs --checkpoint-dir" mnist_cnn --resume auto
  expect 2 "unexpected argument 'stray'" custom_model stray
  expect 0 "Flags:" mnist_cnn --help
  ;;
# Issue 48 item 8: a fresh run refuses a --log that holds another run's rows unless --overwrite,
# which starts it anew; a file that is no metrics log is refused even then, untouched; a resumed
# run appends. What stdout held comes out before the error (both into one file).
log_of_another_run)
  expect 0 "" mnist_cnn "${small[@]}" --epochs 1 --max-steps 2 --log l.csv
  cp l.csv first.csv
  expect 1 "--log 'l.csv' already holds another run's rows: pass --overwrite" mnist_cnn "${small[@]}" --epochs 1 \
    --max-steps 2 --log l.csv
  cmp -s l.csv first.csv || fail "the refused run changed l.csv"
  "$bin/mnist_cnn" "${small[@]}" --epochs 1 --max-steps 2 --log l.csv >both 2>&1
  training=$(grep -n '^Training MnistCnn' both | cut -d: -f1) error=$(grep -n 'already holds' both | cut -d: -f1)
  [ -n "$training" ] && [ -n "$error" ] && [ "$training" -lt "$error" ] || fail "the error came out before 'Training'"
  expect 0 "" mnist_cnn "${small[@]}" --epochs 1 --max-steps 2 --log l.csv --overwrite
  [ "$(wc -l <l.csv)" = 2 ] || fail "--overwrite left $(wc -l <l.csv) lines in l.csv, expected header + 1"
  echo "notes, not metrics" >notes.txt
  expect 1 "--log 'notes.txt' is not a metrics log" mnist_cnn "${small[@]}" --epochs 1 --max-steps 2 --log notes.txt \
    --overwrite
  [ "$(cat notes.txt)" = "notes, not metrics" ] || fail "notes.txt was changed"
  expect 0 "" mnist_cnn "${small[@]}" --epochs 2 --max-steps 2 --checkpoint-dir r --log r.csv
  expect 0 "Resumed from" mnist_cnn "${small[@]}" --epochs 2 --checkpoint-dir r --log r.csv --resume auto
  [ "$(cut -d, -f1 r.csv | tr '\n' ' ')" = "epoch 1 2 " ] || fail "the resumed log: $(cut -d, -f1 r.csv | tr '\n' ' ')"
  ;;
# Item 8: --resume auto on a finished run says so and leaves the checkpoint and the model alone.
finished_run)
  expect 0 "" mnist_cnn "${small[@]}" --epochs 1 --checkpoint-dir f
  cp f/last.ckpt saved.ckpt
  echo mine >f/mnist_cnn.ckpt
  expect 0 "The run of f/last.ckpt has finished its --epochs 1 .*nothing to train" mnist_cnn "${small[@]}" --epochs 1 \
    --checkpoint-dir f --resume auto
  [ "$(cat f/mnist_cnn.ckpt)" = mine ] || fail "the model file was written again"
  cmp -s f/last.ckpt saved.ckpt || fail "the checkpoint was written again"
  ;;
# Item 12: a signal in a run without --checkpoint-dir says that nothing was saved and how to keep
# it; the start-up line counts one thread as one.
interrupted_without_checkpoint_dir)
  "$bin/mnist_cnn" --limit 512 --batch-size 32 --epochs 50 --threads 1 --device cpu >out 2>err &
  pid=$!
  while ! grep -q '^epoch 1:' out && kill -0 $pid 2>/dev/null; do sleep 0.05; done
  kill -INT $pid
  wait $pid
  status=$?
  [ $status = 75 ] || fail "exit status $status after SIGINT, expected 75"
  grep -q 'nothing was saved (no --checkpoint-dir).*Pass --checkpoint-dir DIR' out || fail "no word that nothing was saved"
  grep -q ', 1 thread;' out || fail "the start-up line does not say '1 thread'"
  ;;
*)
  echo "unknown case $case_name"
  exit 2
  ;;
esac
echo "ok ($case_name)"
