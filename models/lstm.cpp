#include "models/lstm.h"

#include <cmath>

#include "models/text_generator.h"

namespace ember::models {

LstmLanguageModel::LstmLanguageModel(LstmLmOptions o)
    : opts(o),
      embed(o.vocab_size, o.embed_dim),
      lstm(o.embed_dim, o.hidden, {.num_layers = o.layers, .batch_first = true, .dropout = o.dropout}),
      head(o.hidden, o.vocab_size) {
  EMBER_CHECK(o.vocab_size > 0, "LstmLanguageModel: vocab_size must be positive");
  register_modules({{"embed", &embed}, {"lstm", &lstm}, {"head", &head}});
}

nn::RnnOutput LstmLanguageModel::forward_with_state(const Tensor& tokens, const nn::RnnState& state) {
  EMBER_CHECK(tokens.dim() == 2, "LstmLanguageModel: expected tokens [B, T], got ", shape_str(tokens.shape()));
  nn::RnnOutput r = lstm(embed(tokens), state);
  r.output = head(r.output);
  return r;
}

std::shared_ptr<nn::Sequential> LstmLanguageModel::as_sequential() {
  // The Sequential refers to this model's members without owning them.
  auto borrowed = [](nn::Module& m) { return std::shared_ptr<nn::Module>(std::shared_ptr<void>(), &m); };
  std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> layers{{"embed", borrowed(embed)}};
  // Building the one-layer LSTMs draws their initial weights, which are then replaced: the random
  // stream is left as it was, so that a pipeline run draws what a run without one draws.
  const GeneratorState rng = default_generator().state();
  for (int64_t l = 0; l < opts.layers; ++l) {
    auto one = std::make_shared<nn::LSTM>(l == 0 ? opts.embed_dim : opts.hidden, opts.hidden,
                                          nn::LSTMOptions{.batch_first = true});
    one->weight_ih(0) = lstm.weight_ih(l);
    one->weight_hh(0) = lstm.weight_hh(l);
    one->bias_ih(0) = lstm.bias_ih(l);
    one->bias_hh(0) = lstm.bias_hh(l);
    layers.emplace_back("lstm" + std::to_string(l), std::make_shared<nn::RnnSequence>(one));
    if (opts.dropout > 0 && l + 1 < opts.layers)
      layers.emplace_back("drop" + std::to_string(l), std::make_shared<nn::Dropout>(opts.dropout));
  }
  default_generator().set_state(rng);
  layers.emplace_back("head", borrowed(head));
  auto seq = std::make_shared<nn::Sequential>(std::move(layers));
  seq->train(is_training());
  return seq;
}

std::vector<int64_t> LstmLanguageModel::generate(const std::vector<int64_t>& prompt, int64_t length, double temperature,
                                                 Generator* gen, int64_t top_k) {
  EMBER_CHECK(!prompt.empty(), "LstmLanguageModel::generate: the prompt is empty");
  NoGradGuard ng;
  const bool was_training = is_training();
  eval();
  Generator& g = gen ? *gen : default_generator();
  const Device dev = head.weight.device();
  const TensorOptions ids{DType::Int64, dev};
  std::vector<int64_t> out;
  nn::RnnOutput r = forward_with_state(from_vector(prompt, {1, static_cast<int64_t>(prompt.size())}, ids));
  for (int64_t i = 0; i < length; ++i) {
    Tensor logits = r.output.select(1, r.output.size(1) - 1).reshape({opts.vocab_size});
    const int64_t next = sample_logits(logits, temperature, top_k, g);
    out.push_back(next);
    if (i + 1 < length) r = forward_with_state(from_vector(std::vector<int64_t>{next}, {1, 1}, ids), {r.h_n, r.c_n});
  }
  train(was_training);
  return out;
}

BiLstmClassifier::BiLstmClassifier(BiLstmOptions o)
    : opts(o),
      embed(o.vocab_size, o.embed_dim, {.padding_idx = o.padding_idx}),
      lstm(o.embed_dim, o.hidden, {.batch_first = true, .bidirectional = true}),
      head(2 * o.hidden, o.classes) {
  register_modules({{"embed", &embed}, {"lstm", &lstm}, {"head", &head}});
}

Tensor BiLstmClassifier::forward(const Tensor& tokens, const std::vector<int64_t>& lengths) {
  EMBER_CHECK(tokens.dim() == 2, "BiLstmClassifier: expected tokens [B, T], got ", shape_str(tokens.shape()));
  nn::RnnOutput r = lstm(embed(tokens), {}, lengths);
  // h_n is [2, B, H]: forward direction's state at each length, backward direction's at step 0.
  Tensor both = cat({r.h_n.select(0, 0), r.h_n.select(0, 1)}, 1);
  return head(both);
}

}  // namespace ember::models
