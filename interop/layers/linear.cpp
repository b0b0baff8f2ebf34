// Linear and Identity (layers/linear.h) in model files (linear, identity) and in ONNX (Gemm, or
// MatMul and Add; Identity).
#include "layers/linear.h"

#include "core/shape.h"
#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

// Its input's last dimension in; out_features out, or the vocabulary's size (to_vocabulary).
std::shared_ptr<nn::Module> linear_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& f = l.linear();
  at.check(!(f.to_vocabulary() && f.has_out_features()), "linear",
           "out_features and to_vocabulary both give its size (expected one of them)");
  const int64_t out = f.to_vocabulary() ? at.sized_by_vocabulary("linear")
                                        : at.required_size(f.has_out_features(), f.out_features(), "out_features");
  at.check(x.dim() >= 2, "linear", "its input is " + shape_str(x.shape()) + " (expected [N, features])");
  return std::make_shared<nn::Linear>(x.size(-1), out, nn::LinearOptions{.bias = !f.no_bias()});
}

std::shared_ptr<nn::Module> identity_from_file(const model_file::Site&, const Layer&, const Tensor&) {
  return std::make_shared<nn::Identity>();
}

onnx::Traced linear_to_onnx(onnx::GraphBuilder& g, nn::Linear& m, const std::string& path, const onnx::Traced& x) {
  const Tensor y = m(x.example);
  if (x.example.dim() == 2) {
    std::vector<std::string> in{x.name, g.initializer(path + ".weight", m.weight)};
    if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
    return {g.node1("Gemm", in, path, {{"transB", int64_t{1}}}), y};
  }
  // Any other rank ([B, T, F] from an RNN): MatMul broadcasts over the leading dimensions.
  const std::string w = g.initializer(path + ".weight_t", m.weight.t().contiguous());
  std::string out = g.node1("MatMul", {x.name, w}, m.bias.defined() ? path + ".matmul" : path);
  if (m.bias.defined()) out = g.node1("Add", {out, g.initializer(path + ".bias", m.bias)}, path);
  return {out, y};
}

onnx::Traced identity_to_onnx(onnx::GraphBuilder& g, nn::Identity& m, const std::string& path, const onnx::Traced& x) {
  return {g.node1("Identity", {x.name}, path), m.forward(x.example)};
}

const model_file::LayerRegistration linear_file{Layer::kLinear, {.build = linear_from_file}};
const onnx::ExporterRegistration<nn::Linear> linear_onnx{"Linear", linear_to_onnx};
const model_file::LayerRegistration identity_file{Layer::kIdentity, {.build = identity_from_file}};
const onnx::ExporterRegistration<nn::Identity> identity_onnx{"Identity", identity_to_onnx};

}  // namespace
}  // namespace ember
