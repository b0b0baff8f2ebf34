#!/usr/bin/env bash
# ctest tools.eval_language_model: `ember eval` of `ember train models/lstm_lm.pbtxt`'s checkpoints
# prints the held-out loss, perplexity and accuracy the run printed after its epoch (the corpus
# rebuilt with the run's --limit, which the checkpoint records), for the model file lstm_lm.ckpt
# and for last.ckpt; another --limit builds another vocabulary, which is refused by name. Fine-tuning
# from the checkpoint (--init-from) checks the vocabulary beside it the same way.
# Usage: eval_language_model.sh EMBER MODELS_DIR
set -euo pipefail
ember=$1 models=$2
work=$(mktemp -d "$PWD/eval_lm.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
"$ember" train "$models/lstm_lm.pbtxt" --limit 100 --epochs 1 --max-steps 3 --batch-size 4 --checkpoint-dir lm >train.out
trained=$(grep -o 'held-out loss [0-9.]* ppl [0-9.]* acc [0-9.]*' train.out | tail -n 1)
echo "ember train: $trained"
[ -n "$trained" ]
for ckpt in lm/lstm_lm.ckpt lm/last.ckpt; do
  "$ember" eval $ckpt >eval.out
  cat eval.out
  grep -qx "$trained" eval.out
done
if "$ember" eval lm/lstm_lm.ckpt --limit 50 >/dev/null 2>err; then
  echo "another --limit's vocabulary was accepted"
  exit 1
fi
grep "ember eval: the vocabulary built now differs from the checkpoint's lm/vocab.txt" err

"$ember" train "$models/lstm_lm.pbtxt" --limit 100 --epochs 1 --max-steps 2 --batch-size 4 --checkpoint-dir ft \
  --init-from lm/lstm_lm.ckpt >ft.out
grep -E "^Initialised [0-9]+ tensors from lm/lstm_lm.ckpt" ft.out
if "$ember" train "$models/lstm_lm.pbtxt" --limit 50 --epochs 1 --max-steps 2 --checkpoint-dir ft50 \
  --init-from lm/lstm_lm.ckpt >/dev/null 2>err; then
  echo "fine-tuning on another vocabulary was accepted"
  exit 1
fi
grep "vocabulary built now differs from the checkpoint's lm/vocab.txt" err
