#include "layers/embedding.h"

#include "core/autograd/grad_mode.h"
#include "core/ops/creation.h"
#include "layers/functional.h"
#include "layers/init.h"

namespace ember::nn {

Embedding::Embedding(int64_t num, int64_t dim, EmbeddingOptions o) : num_embeddings(num), embedding_dim(dim) {
  EMBER_CHECK(num > 0 && dim > 0, "Embedding: num_embeddings (", num, ") and embedding_dim (", dim,
              ") must be positive");
  if (o.padding_idx) {
    const int64_t p = *o.padding_idx;
    EMBER_CHECK(p >= -num && p < num, "Embedding: padding_idx ", p, " must be within [", -num, ", ", num, ")");
    padding_idx = p < 0 ? p + num : p;
  }
  weight = empty({num, dim});
  reset_parameters();
  register_parameter("weight", &weight);
}

std::shared_ptr<Embedding> Embedding::from_pretrained(const Tensor& weights, bool freeze, EmbeddingOptions options) {
  EMBER_CHECK(weights.defined() && weights.dim() == 2, "Embedding::from_pretrained: weights must be 2-D, got ",
              weights.defined() ? shape_str(weights.shape()) : std::string("(undefined)"));
  auto e = std::make_shared<Embedding>(weights.size(0), weights.size(1), options);
  NoGradGuard ng;
  e->weight = weights.detach().clone();  // the registered slot now holds the copy
  e->weight.requires_grad_(!freeze);
  return e;
}

void Embedding::reset_parameters(Generator* gen) {
  init::normal_(weight, 0.0, 1.0, gen);
  if (padding_idx >= 0) {
    NoGradGuard ng;
    weight.select(0, padding_idx).fill_(0.0);
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  return F::embedding(weight, indices, padding_idx);
}

std::string Embedding::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx >= 0) s += ", padding_idx=" + std::to_string(padding_idx);
  return s;
}

}  // namespace ember::nn
