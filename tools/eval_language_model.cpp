#include "tools/eval_language_model.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "core/autograd/grad_mode.h"
#include "layers/checkpoint.h"
#include "tools/model_file_data.h"
#include "tools/saved_model.h"
#include "train/language_model.h"
#include "train/training.h"

namespace ember::tools {
namespace {

namespace fs = std::filesystem;

// The vocabulary of the network's output ([1, T, V] logits of one window).
int64_t output_vocabulary(nn::Module& net, const Tensor& example) {
  NoGradGuard ng;
  net.eval();
  const Tensor y = net(example);
  EMBER_CHECK(y.dim() == 3, "a language model's network gives logits [N, T, vocabulary], this one ",
              shape_str(y.shape()));
  return y.size(2);
}

// The corpus must give every token the id it had in training: the training library's check of the
// vocab.txt beside the checkpoint (false: it has said how they differ), then the network's width.
bool vocabulary_fits(const train::Corpus& c, const std::string& checkpoint, int64_t outputs) {
  if (!fs::exists(fs::path(checkpoint).parent_path() / "vocab.txt"))
    std::cerr << "ember eval: note: no vocab.txt beside " << checkpoint << ": the vocabulary is not checked\n";
  else if (!train::vocabulary_matches_checkpoint(c.vocab, checkpoint, "ember eval",
                                                 "--data and --limit as the training run"))
    return false;
  EMBER_CHECK(c.vocab.size() == outputs, "the vocabulary built now has ", c.vocab.size(), " tokens but ", checkpoint,
              "'s network predicts ", outputs, ": use the training run's --data and --limit");
  return true;
}

}  // namespace

std::optional<model_file::LoadedFile> language_model_file(SavedCheckpoint& ckpt, const std::string& model_file) {
  std::string path = model_file;
  if (path.empty()) {
    const auto& meta = ckpt.contents().metadata;
    auto it = meta.find("model_file");
    if (it == meta.end() || !fs::exists(it->second)) return std::nullopt;
    path = it->second;
  }
  model_file::LoadedFile file = model_file::load(path);
  if (!file.spec.has_language_model()) return std::nullopt;
  return file;
}

int eval_language_model(const model_file::LoadedFile& file, const LmEval& e) {
  const auto& text = file.spec.data().text();
  const auto& meta = e.ckpt->contents().metadata;
  const std::string& checkpoint = e.ckpt->path();
  long limit = e.limit;
  if (!e.limit_given && meta.count("corpus.limit")) limit = std::stol(meta.at("corpus.limit"));
  const std::string dir = e.data.empty() ? text_dir(file) : e.data;
  const train::Corpus c = train::read_corpus(corpus_options(file, dir, limit));
  std::vector<Tensor> example;
  std::shared_ptr<nn::Module> net = model_file_network(file.path, "", *e.ckpt, 1, example);
  if (!vocabulary_fits(c, checkpoint, output_vocabulary(*net, example[0]))) return 1;
  data::LanguageModelDataset test_set(c.test_ids, text.seq_len());
  EMBER_CHECK(test_set.size() > 0, "the held-out fortunes of ", dir, " make no window of ", text.seq_len(), " tokens");
  net->to(e.dev);
  const train::EvalResult ev = train::evaluate_lm(*net, test_set, e.dev, 64);
  if (e.json) {
    std::printf("{\"loss\": %.17g, \"perplexity\": %.17g, \"accuracy\": %.17g, \"windows\": %lld}\n", ev.loss,
                std::exp(ev.loss), ev.accuracy, (long long)test_set.size());
    return 0;
  }
  std::printf("Evaluating %s's language model from %s on the held-out fortunes of %s (%zu of %zu, %lld windows)%s\n",
              file.path.c_str(), checkpoint.c_str(), dir.c_str(), c.test_docs, c.docs, (long long)test_set.size(),
              limit >= 0 ? (" (--limit " + std::to_string(limit) + ")").c_str() : "");
  std::printf("held-out loss %.4f ppl %.3f acc %.4f\n", ev.loss, std::exp(ev.loss), ev.accuracy);
  return 0;
}

}  // namespace ember::tools
