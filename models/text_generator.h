// Sampling text from a language model: one token from a logits vector (temperature, optional
// top-k), and a TextGenerator that continues a prompt with an LstmLanguageModel, carrying the
// LSTM state from token to token. The generator owns a seeded random stream, so the same seed
// gives the same text and sampling never disturbs the training run's random numbers (a resumed
// run stays bit-identical whether or not it printed samples).
#pragma once

#include <cstdint>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "models/lstm.h"

namespace ember::models {

struct SamplingOptions {
  double temperature = 1.0;  // <= 0: always the most likely token (greedy)
  int64_t top_k = 0;         // > 0: sample among the k most likely tokens only
  uint64_t seed = 0;
};

// One token id drawn from softmax(logits / temperature), restricted to the top_k largest logits
// when top_k > 0 (ties broken towards the lower id). logits: a floating [V] tensor on any device.
int64_t sample_logits(const Tensor& logits, double temperature, int64_t top_k, Generator& gen);

class TextGenerator {
 public:
  TextGenerator(LstmLanguageModel& model, SamplingOptions opts);
  // Continues `prompt` (at least one token) by up to `length` tokens, stopping early after
  // `stop_token` when it is >= 0; returns the new tokens only. Runs in eval mode without autograd
  // and restores the model's mode afterwards.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t length, int64_t stop_token = -1);
  void reseed(uint64_t seed) { gen_.manual_seed(seed); }
  const SamplingOptions& options() const { return opts_; }

 private:
  LstmLanguageModel& model_;
  SamplingOptions opts_;
  Generator gen_;
};

}  // namespace ember::models
