// Recurrent text models: an LSTM language model (Embedding -> LSTM -> Linear over the vocabulary)
// with a sampler, and a bidirectional LSTM classifier over variable-length token sequences.
#pragma once

#include <vector>

#include "layers/nn.h"

namespace ember::models {

struct LstmLmOptions {
  int64_t vocab_size = 0;
  int64_t embed_dim = 64;
  int64_t hidden = 128;
  int64_t layers = 1;
  double dropout = 0.0;
};

class LstmLanguageModel : public nn::Module {
 public:
  explicit LstmLanguageModel(LstmLmOptions o);
  // tokens int64 [B, T] -> logits [B, T, V]; `state` carries (h, c) across calls (truncated BPTT).
  nn::RnnOutput forward_with_state(const Tensor& tokens, const nn::RnnState& state = {});
  Tensor forward(const Tensor& tokens) override { return forward_with_state(tokens).output; }
  // Continues `prompt` by `length` tokens sampled with `temperature` (argmax when <= 0) among the
  // top_k most likely (all when 0); see models/text_generator.h for a generator with its own seed.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t length, double temperature,
                                Generator* gen = nullptr, int64_t top_k = 0);
  std::string type_name() const override { return "LstmLanguageModel"; }

  // The same model as an nn::Sequential of its layers, for a pipeline to cut between them: embed,
  // lstm0 .. lstm{L-1} (one LSTM layer each, with a Dropout drop{l} after every one but the last
  // when opts.dropout > 0, as the multi-layer LSTM applies it), head. Its parameters are this
  // model's own tensors, not copies (training either trains both), under the layers' names:
  // "lstm1.weight_ih_l0" is this model's "lstm.weight_ih_l1". It runs from a zero state (no
  // truncated-BPTT state across calls) and must not outlive this model.
  std::shared_ptr<nn::Sequential> as_sequential();

  LstmLmOptions opts;
  nn::Embedding embed;
  nn::LSTM lstm;
  nn::Linear head;
};

struct BiLstmOptions {
  int64_t vocab_size = 0;
  int64_t embed_dim = 32;
  int64_t hidden = 64;
  int64_t classes = 2;
  int64_t padding_idx = 0;
};

// Embeds tokens, runs a bidirectional LSTM honouring each sequence's length, concatenates the two
// directions' final states and classifies them.
class BiLstmClassifier : public nn::Module {
 public:
  explicit BiLstmClassifier(BiLstmOptions o);
  // tokens int64 [B, T] (padded), lengths per sequence -> logits [B, classes].
  using nn::Module::forward;
  Tensor forward(const Tensor& tokens, const std::vector<int64_t>& lengths);
  std::string type_name() const override { return "BiLstmClassifier"; }

  BiLstmOptions opts;
  nn::Embedding embed;
  nn::LSTM lstm;
  nn::Linear head;
};

}  // namespace ember::models
