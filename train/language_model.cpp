#include "train/language_model.h"

#include <cmath>
#include <cstdio>

#include "core/ops.h"
#include "data/dataloader.h"
#include "data/text_corpus.h"
#include "layers/nn.h"
#include "train/accumulate.h"
#include "train/cuda_graph_step.h"
#include "train/precision.h"
#ifdef EMBER_HAVE_DIST
#include "dist/pipeline.h"
#endif

namespace ember::train {

Tensor lm_loss(const Tensor& logits, const Tensor& y, const CrossEntropyOptions& opts) {
  return cross_entropy(logits.reshape({y.numel(), logits.size(2)}), y.reshape({y.numel()}), opts);
}

Tensor lm_correct_count(const Tensor& logits, const Tensor& y) {
  const Tensor flat = logits.reshape({y.numel(), logits.size(2)});
  return sum(eq(argmax(flat, 1), y.reshape({y.numel()})));
}

std::vector<double> lm_correct(const Tensor& logits, const Tensor& y) {
  return {static_cast<double>(lm_correct_count(logits, y).item<int64_t>())};
}

EvalResult evaluate_lm(nn::Module& net, const data::Dataset& ds, Device dev, int64_t batch, ParallelJob* job) {
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

Corpus read_corpus(const CorpusOptions& f) {
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

StepReport lm_step(double clip, nn::Module& net, const std::vector<Tensor>& params, optim::Optimizer& opt, Device dev,
                   ParallelJob& job, const Tensor& x, const Tensor& y, RunningSums& sums) {
  const int64_t n = y.numel();
  double loss = 0, correct = 0;
  EMBER_CHECK(!cuda_graph_requested(),
              "--cuda-graph captures the classifiers' step only; the language model's "
              "step is not captured (train/cuda_graph_step.h)");
  bool pipelined = false;
  opt.zero_grad();
#ifdef EMBER_HAVE_DIST
  if (dist::Pipeline* pipe = job.pipeline()) {  // the loss and the correct count come from the last stage
    loss = pipe->train_step(
        x.to(dev), y.to(dev), [](const Tensor& logits, const Tensor& t) { return lm_loss(logits, t); }, lm_correct);
    correct = pipe->last_step().metrics.at(0);
    pipelined = true;
  }
#endif
  if (!pipelined) {
    const StepPasses r = forward_backward(
        net, &job, dev, x, y, {},
        [](const Tensor& logits, const Tensor& t, const CrossEntropyOptions& o) { return lm_loss(logits, t, o); },
        lm_correct_count);
    loss = r.loss, correct = r.correct;
  }
  if (clip > 0) {
    run_precision().unscale_(opt);  // fp16: clip the true gradients, not the scaled ones
    job.clip_grad_norm(params, clip);
  }
  run_precision().step(opt);
  run_precision().update();
  sums["loss_sum"] += loss * static_cast<double>(n);
  sums["correct"] += correct;
  sums["seen"] += static_cast<double>(n);
  const double mean = sums["loss_sum"] / sums["seen"];
  return {y.size(0), {{"loss", mean}, {"ppl", std::exp(mean)}, {"acc", sums["correct"] / sums["seen"]}}};
}

std::vector<std::string> lm_columns() {
  return {"epoch", "step", "train_loss", "train_ppl", "test_loss", "test_ppl", "test_acc", "unigram_ppl", "seconds"};
}

void lm_summary(const Corpus& c, const EpochEnd& e, const EvalResult& ev, MetricsLog& log) {
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

void score_baseline(Corpus& c, const data::LanguageModelDataset& test_set) {
  c.scored = test_set.targets();
  c.unigram_ppl = data::unigram_perplexity(c.train_ids, c.scored, c.vocab.size());
  for (int64_t t : c.scored) c.test_unk += t == data::Vocabulary::kUnk;
}

}  // namespace ember::train
