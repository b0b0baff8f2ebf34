// The language-model side the text programs share (lstm_lm, and `ember train` on a model file with
// a text source): the fortunes corpus with its vocabulary and unigram baseline, the next-token loss
// and accuracy, one training step (data-parallel or pipelined through the job), the held-out
// evaluation, and the epoch's summary line and metrics row.
#pragma once

#include <string>
#include <vector>

#include "core/ops/nn.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "data/text_datasets.h"
#include "data/vocabulary.h"
#include "layers/optim/optimizer.h"
#include "train/parallel_job.h"
#include "train/trainer.h"

namespace ember::train {

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Next-token cross-entropy over a batch's logits [B, T, V] and targets [B, T].
Tensor lm_loss(const Tensor& logits, const Tensor& y, const CrossEntropyOptions& opts = {});
std::vector<double> lm_correct(const Tensor& logits, const Tensor& y);
Tensor lm_correct_count(const Tensor& logits, const Tensor& y);  // lm_correct's count, on the device

// Mean next-token cross-entropy and accuracy over every target of `ds` (each sequence starts from
// a zero state). In a job each replica scores its shard (through the pipeline's stages in a
// pipeline) and the sums are added up; without one (`ember eval`), one process scores them all.
EvalResult evaluate_lm(nn::Module& net, const data::Dataset& ds, Device dev, int64_t batch, ParallelJob* job = nullptr);

// Unique fortunes split by document, the vocabulary of the training side, both sides as token
// ids, and the unigram baseline on the very held-out targets the model is scored on.
struct Corpus {
  size_t docs = 0, train_docs = 0, test_docs = 0;
  data::Vocabulary vocab;
  std::vector<int64_t> train_ids, test_ids, scored;
  double unigram_ppl = 0;
  int64_t test_unk = 0;
};

// What the corpus is made from (lstm_lm's flags; a model file's text source).
struct CorpusOptions {
  std::string data_dir = "/usr/share/games/fortunes";
  std::string level = "char";  // or "word"
  bool lowercase = false;
  int64_t min_freq = 0;       // 0: 2 for char, 3 for word
  int64_t max_vocab = 10000;  // specials included; 0: none
  double test_fraction = 0.1;
  int64_t split_seed = 1234;
  int64_t limit = -1;  // the first N fortunes; -1: all
};

Corpus read_corpus(const CorpusOptions& f);

// One step of `net` (the model's layers) on a batch of sequences: next-token cross-entropy,
// gradients clipped to norm `clip` (0: none), the optimizer's step; in a job through the data-parallel wrapper or the
// pipeline, on `params` (this rank's).
StepReport lm_step(double clip, nn::Module& net, const std::vector<Tensor>& params, optim::Optimizer& opt, Device dev,
                   ParallelJob& job, const Tensor& x, const Tensor& y, RunningSums& sums);

// The metrics log's columns of a language model.
std::vector<std::string> lm_columns();

// The epoch's summary against the unigram baseline, and its log row.
void lm_summary(const Corpus& c, const EpochEnd& e, const EvalResult& ev, MetricsLog& log);

// The held-out targets' baseline, once the datasets are cut: c.scored, c.unigram_ppl, c.test_unk.
void score_baseline(Corpus& c, const data::LanguageModelDataset& test_set);

}  // namespace ember::train
