// Flatten and Unflatten (layers/shape.h) in model files (flatten { start_dim end_dim }, unflatten
// { dim sizes }) and in ONNX (Flatten, or Reshape with the batch left free).
#include "core/shape.h"

#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"
#include "layers/shape.h"

namespace ember {
namespace {

using train_file::Layer;

std::shared_ptr<nn::Module> flatten_from_file(const model_file::Site&, const Layer& l, const Tensor&) {
  return std::make_shared<nn::Flatten>(l.flatten().has_start_dim() ? l.flatten().start_dim() : 1,
                                       l.flatten().has_end_dim() ? l.flatten().end_dim() : -1);
}

std::shared_ptr<nn::Module> unflatten_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& u = l.unflatten();
  at.check(u.has_dim(), "unflatten", "dim is missing (expected the dimension to split, 1 or later)");
  at.check(!u.sizes().empty(), "unflatten", "sizes is missing (expected the sizes to split into)");
  return std::make_shared<nn::Unflatten>(at.dimension(u.dim(), x.dim(), "dim"),
                                         Shape(u.sizes().begin(), u.sizes().end()));
}

// Reshape to `shape`, where 0 keeps the input's dimension (the batch stays free).
onnx::Traced reshape(onnx::GraphBuilder& g, const std::vector<int64_t>& shape, const std::string& path,
                     const onnx::Traced& x, Tensor y) {
  return {g.node1("Reshape", {x.name, g.int64s(path + ".shape", shape)}, path), std::move(y)};
}

onnx::Traced flatten_to_onnx(onnx::GraphBuilder& g, nn::Flatten& m, const std::string& path, const onnx::Traced& x) {
  const Tensor y = m(x.example);
  const int64_t rank = x.example.dim();
  const int64_t start = wrap_dim(m.start_dim, rank, "Flatten"), end = wrap_dim(m.end_dim, rank, "Flatten");
  if (start == 1 && end == rank - 1) return {g.node1("Flatten", {x.name}, path, {{"axis", int64_t{1}}}), y};
  std::vector<int64_t> shape(static_cast<size_t>(start), 0);
  shape.push_back(-1);
  for (int64_t d = end + 1; d < rank; ++d) shape.push_back(x.example.size(d));
  return reshape(g, shape, path, x, y);
}

onnx::Traced unflatten_to_onnx(onnx::GraphBuilder& g, nn::Unflatten& m, const std::string& path,
                               const onnx::Traced& x) {
  const Tensor y = m(x.example);
  const int64_t rank = x.example.dim();
  const int64_t dim = wrap_dim(m.dim, rank, "Unflatten");
  EMBER_CHECK(dim > 0, "ONNX export: Unflatten '", path,
              "' splits dimension 0, the batch, which the model "
              "leaves free (expected a later dimension)");
  std::vector<int64_t> shape(static_cast<size_t>(dim), 0);
  shape.insert(shape.end(), m.sizes.begin(), m.sizes.end());
  for (int64_t d = dim + 1; d < rank; ++d) shape.push_back(x.example.size(d));
  return reshape(g, shape, path, x, y);
}

const model_file::LayerRegistration flatten_file{Layer::kFlatten, {.build = flatten_from_file}};
const onnx::ExporterRegistration<nn::Flatten> flatten_onnx{"Flatten", flatten_to_onnx};
const model_file::LayerRegistration unflatten_file{Layer::kUnflatten, {.build = unflatten_from_file}};
const onnx::ExporterRegistration<nn::Unflatten> unflatten_onnx{"Unflatten", unflatten_to_onnx};

}  // namespace
}  // namespace ember
