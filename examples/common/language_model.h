// The language-model side the text programs share (lstm_lm, and `ember train` on a model file with
// a text source): the fortunes corpus with its vocabulary and unigram baseline, the next-token loss
// and accuracy, one training step (data-parallel or pipelined through the job), the held-out
// evaluation, and the epoch's summary line and metrics row.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/parallel_job.h"
#include "common/trainer.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "data/text_datasets.h"
#include "data/vocabulary.h"

namespace ember::examples {

struct EvalResult {
  double loss = 0, accuracy = 0;
};

// Next-token cross-entropy over a batch's logits [B, T, V] and targets [B, T].
inline Tensor lm_loss(const Tensor& logits, const Tensor& y) {
  return cross_entropy(logits.reshape({y.numel(), logits.size(2)}), y.reshape({y.numel()}));
}
inline std::vector<double> lm_correct(const Tensor& logits, const Tensor& y) {
  const Tensor flat = logits.reshape({y.numel(), logits.size(2)});
  return {static_cast<double>(sum(eq(argmax(flat, 1), y.reshape({y.numel()}))).item<int64_t>())};
}

// Mean next-token cross-entropy and accuracy over every target of `ds` (each sequence starts from
// a zero state). In a job each replica scores its shard (through the pipeline's stages in a
// pipeline) and the sums are added up; without one (`ember eval`), one process scores them all.
inline EvalResult evaluate_lm(nn::Module& net, const data::Dataset& ds, Device dev, int64_t batch,
                              ParallelJob* job = nullptr) {
  NoGradGuard ng;
  const bool was_training = net.is_training();
  net.eval();
  data::DataLoader loader(
      ds,
      {.batch_size = batch, .shuffle = false, .rank = job ? job->shard() : 0, .world_size = job ? job->shards() : 1});
  double loss_sum = 0;
  int64_t correct = 0, total = 0;
  for (auto& [x, y] : loader) {
    Tensor logits;
#ifdef EMBER_HAVE_DIST
    if (dist::Pipeline* pipe = job ? job->pipeline() : nullptr) {  // the logits exist on the last stage only
      logits = pipe->forward(x.to(dev));
      if (!logits.defined()) continue;
    }
#endif
    if (!logits.defined()) logits = net(x.to(dev));
    const int64_t n = y.numel();
    Tensor flat = logits.reshape({n, logits.size(2)});
    Tensor yd = y.to(dev).reshape({n});
    loss_sum += cross_entropy(flat, yd, {.reduction = Reduction::Sum}).item();
    correct += static_cast<int64_t>(lm_correct(logits, yd)[0]);
    total += n;
  }
  net.train(was_training);
  if (job && job->active()) {
    const std::vector<double> s = job->sum({loss_sum, static_cast<double>(correct), static_cast<double>(total)});
    loss_sum = s[0], correct = static_cast<int64_t>(s[1]), total = static_cast<int64_t>(s[2]);
  }
  return {total ? loss_sum / static_cast<double>(total) : 0.0,
          total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0};
}

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

inline Corpus read_corpus(const CorpusOptions& f) {
  std::vector<std::string> docs = data::unique_texts(data::read_fortunes(f.data_dir));
  if (f.limit > 0 && static_cast<int64_t>(docs.size()) > f.limit) docs.resize(static_cast<size_t>(f.limit));
  data::SplitIndices split =
      data::split_indices(static_cast<int64_t>(docs.size()), f.test_fraction, static_cast<uint64_t>(f.split_seed));
  std::vector<std::string> train_docs, test_docs;
  for (int64_t i : split.train) train_docs.push_back(docs[static_cast<size_t>(i)]);
  for (int64_t i : split.test) test_docs.push_back(docs[static_cast<size_t>(i)]);
  const data::TokenizerOptions tok{.level = f.level == "char" ? data::TokenLevel::Char : data::TokenLevel::Word,
                                   .lowercase = f.lowercase};
  Corpus c;
  c.docs = docs.size(), c.train_docs = train_docs.size(), c.test_docs = test_docs.size();
  c.vocab = data::Vocabulary::build(
      train_docs, tok,
      {.min_freq = f.min_freq > 0 ? f.min_freq : (f.level == "char" ? 2 : 3), .max_size = f.max_vocab});
  c.train_ids = data::encode_documents(c.vocab, train_docs);
  c.test_ids = data::encode_documents(c.vocab, test_docs);
  return c;
}

// One step of `net` (the model's layers) on a batch of sequences: next-token cross-entropy,
// gradients clipped to norm `clip` (0: none), the optimizer's step; in a job through the data-parallel wrapper or the
// pipeline, on `params` (this rank's).
inline StepReport lm_step(double clip, nn::Module& net, const std::vector<Tensor>& params, optim::Optimizer& opt,
                          Device dev, ParallelJob& job, const Tensor& x, const Tensor& y, RunningSums& sums) {
  const int64_t n = y.numel();
  double loss = 0, correct = 0;
  bool pipelined = false;
  opt.zero_grad();
#ifdef EMBER_HAVE_DIST
  if (dist::Pipeline* pipe = job.pipeline()) {  // the loss and the correct count come from the last stage
    loss = pipe->train_step(x.to(dev), y.to(dev), lm_loss, lm_correct);
    correct = pipe->last_step().metrics.at(0);
    pipelined = true;
  }
#endif
  if (!pipelined) {
    Tensor logits = job.forward(net, x.to(dev)), yd = y.to(dev);
    Tensor l = job.weight(lm_loss(logits, yd));  // data-parallel: weighted by this rank's share
    l.backward();
    loss = l.item() / job.loss_weight();
    NoGradGuard ng;
    correct = lm_correct(logits, yd)[0];
  }
  if (clip > 0) job.clip_grad_norm(params, clip);
  opt.step();
  sums["loss_sum"] += loss * static_cast<double>(n);
  sums["correct"] += correct;
  sums["seen"] += static_cast<double>(n);
  const double mean = sums["loss_sum"] / sums["seen"];
  return {y.size(0), {{"loss", mean}, {"ppl", std::exp(mean)}, {"acc", sums["correct"] / sums["seen"]}}};
}

// The metrics log's columns of a language model.
inline std::vector<std::string> lm_columns() {
  return {"epoch", "step", "train_loss", "train_ppl", "test_loss", "test_ppl", "test_acc", "unigram_ppl", "seconds"};
}

// The epoch's summary against the unigram baseline, and its log row.
inline void lm_summary(const Corpus& c, const EpochEnd& e, const EvalResult& ev, MetricsLog& log) {
  const double seen = e.sums.count("seen") ? e.sums.at("seen") : 0.0;
  const double train_loss = seen ? e.sums.at("loss_sum") / seen : 0.0;
  std::printf(
      "%s: train loss %.4f ppl %.3f | held-out loss %.4f ppl %.3f acc %.4f | unigram ppl %.3f | "
      "%.1f s\n",
      e.title.c_str(), train_loss, std::exp(train_loss), ev.loss, std::exp(ev.loss), ev.accuracy, c.unigram_ppl,
      e.seconds());
  log.row({{"epoch", double(e.epoch + 1)},
           {"step", double(e.step)},
           {"train_loss", train_loss},
           {"train_ppl", std::exp(train_loss)},
           {"test_loss", ev.loss},
           {"test_ppl", std::exp(ev.loss)},
           {"test_acc", ev.accuracy},
           {"unigram_ppl", c.unigram_ppl},
           {"seconds", e.seconds()}});
}

// The held-out targets' baseline, once the datasets are cut: c.scored, c.unigram_ppl, c.test_unk.
inline void score_baseline(Corpus& c, const data::LanguageModelDataset& test_set) {
  c.scored = test_set.targets();
  c.unigram_ppl = data::unigram_perplexity(c.train_ids, c.scored, c.vocab.size());
  for (int64_t t : c.scored) c.test_unk += t == data::Vocabulary::kUnk;
}

}  // namespace ember::examples
