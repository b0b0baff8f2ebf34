// Embedding (layers/embedding.h) in model files (embedding { num_embeddings dim }, the first layer
// of a network of token ids) and in ONNX (Gather).
#include "layers/embedding.h"

#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

// num_embeddings defaults to the vocabulary's size (a text source).
std::shared_ptr<nn::Module> embedding_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& e = l.embedding();
  const int64_t n = e.has_num_embeddings() ? at.size_or(true, e.num_embeddings(), 0, "num_embeddings")
                                           : at.sized_by_vocabulary("embedding");
  const int64_t dim = at.required_size(e.has_dim(), e.dim(), "dim");
  at.check(!is_floating(x.dtype()), "embedding",
           "its input is " + std::string(dtype_name(x.dtype())) +
               " (expected token ids: put it first in a network of a text source)");
  return std::make_shared<nn::Embedding>(n, dim);
}

onnx::Traced embedding_to_onnx(onnx::GraphBuilder& g, nn::Embedding& m, const std::string& path,
                               const onnx::Traced& x) {
  return {g.node1("Gather", {g.initializer(path + ".weight", m.weight), x.name}, path, {{"axis", int64_t{0}}}),
          m(x.example)};
}

const model_file::LayerRegistration embedding_file{Layer::kEmbedding,
                                                   {.build = embedding_from_file, .token_input = true}};
const onnx::ExporterRegistration<nn::Embedding> embedding_onnx{"Embedding", embedding_to_onnx};

}  // namespace
}  // namespace ember
