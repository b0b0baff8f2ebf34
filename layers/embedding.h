// Embedding: a lookup table [num_embeddings, embedding_dim] indexed by integer tensors of any
// shape (output: indices.shape + [embedding_dim]), over core's embedding op. As in PyTorch the
// weight starts from N(0, 1), and the padding_idx row (negative values count from the end) is
// zeros and receives no gradient.
#pragma once

#include <optional>

#include "core/generator.h"
#include "layers/module.h"

namespace ember::nn {

struct EmbeddingOptions {
  std::optional<int64_t> padding_idx;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, EmbeddingOptions options = {});
  // A layer holding a copy of `weights` [num, dim]; frozen (requires_grad false) when freeze.
  static std::shared_ptr<Embedding> from_pretrained(const Tensor& weights, bool freeze = true,
                                                    EmbeddingOptions options = {});
  Tensor forward(const Tensor& indices) override;
  void reset_parameters(Generator* gen = nullptr);
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  int64_t padding_idx = -1;  // -1: none (after wrapping a negative option)
  Tensor weight;
};

}  // namespace ember::nn
