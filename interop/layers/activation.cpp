// The activations (layers/activation.h) in model files (relu, leaky_relu, elu, gelu, sigmoid,
// tanh, softmax, log_softmax) and in ONNX (the operators of the same names; GELU written out).
#include "layers/activation.h"

#include "core/ops.h"
#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

// A module of no fields.
template <class M>
std::shared_ptr<nn::Module> plain_from_file(const model_file::Site&, const Layer&, const Tensor&) {
  return std::make_shared<M>();
}

std::shared_ptr<nn::Module> leaky_relu_from_file(const model_file::Site& at, const Layer& l, const Tensor&) {
  return std::make_shared<nn::LeakyReLU>(
      at.real_or(l.leaky_relu().has_negative_slope(), l.leaky_relu().negative_slope(), 0.01, "negative_slope"));
}

std::shared_ptr<nn::Module> elu_from_file(const model_file::Site& at, const Layer& l, const Tensor&) {
  return std::make_shared<nn::ELU>(at.real_or(l.elu().has_alpha(), l.elu().alpha(), 1.0, "alpha"));
}

std::shared_ptr<nn::Module> gelu_from_file(const model_file::Site&, const Layer& l, const Tensor&) {
  return std::make_shared<nn::GELU>(l.gelu().tanh() ? "tanh" : "none");
}

int64_t softmax_dim(const model_file::Site& at, const train_file::Softmax& s, const Tensor& x) {
  return at.dimension(s.has_dim() ? s.dim() : -1, x.dim(), "dim");
}

std::shared_ptr<nn::Module> softmax_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  return std::make_shared<nn::Softmax>(softmax_dim(at, l.softmax(), x));
}

std::shared_ptr<nn::Module> log_softmax_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  return std::make_shared<nn::LogSoftmax>(softmax_dim(at, l.log_softmax(), x));
}

// The ONNX operator `op` of one input.
onnx::Traced unary(onnx::GraphBuilder& g, nn::Module& m, const char* op, const std::string& path, const onnx::Traced& x,
                   const std::vector<onnx::Attribute>& attrs = {}) {
  return {g.node1(op, {x.name}, path, attrs), m.forward(x.example)};
}

onnx::Traced relu_to_onnx(onnx::GraphBuilder& g, nn::ReLU& m, const std::string& path, const onnx::Traced& x) {
  return unary(g, m, "Relu", path, x);
}
onnx::Traced sigmoid_to_onnx(onnx::GraphBuilder& g, nn::Sigmoid& m, const std::string& path, const onnx::Traced& x) {
  return unary(g, m, "Sigmoid", path, x);
}
onnx::Traced tanh_to_onnx(onnx::GraphBuilder& g, nn::Tanh& m, const std::string& path, const onnx::Traced& x) {
  return unary(g, m, "Tanh", path, x);
}
onnx::Traced leaky_relu_to_onnx(onnx::GraphBuilder& g, nn::LeakyReLU& m, const std::string& path,
                                const onnx::Traced& x) {
  return unary(g, m, "LeakyRelu", path, x, {{"alpha", static_cast<float>(m.negative_slope)}});
}
onnx::Traced elu_to_onnx(onnx::GraphBuilder& g, nn::ELU& m, const std::string& path, const onnx::Traced& x) {
  return unary(g, m, "Elu", path, x, {{"alpha", static_cast<float>(m.alpha)}});
}
onnx::Traced softmax_to_onnx(onnx::GraphBuilder& g, nn::Softmax& m, const std::string& path, const onnx::Traced& x) {
  return unary(g, m, "Softmax", path, x, {{"axis", m.dim}});
}
onnx::Traced log_softmax_to_onnx(onnx::GraphBuilder& g, nn::LogSoftmax& m, const std::string& path,
                                 const onnx::Traced& x) {
  return unary(g, m, "LogSoftmax", path, x, {{"axis", m.dim}});
}

onnx::Traced gelu_to_onnx(onnx::GraphBuilder& g, nn::GELU& m, const std::string& path, const onnx::Traced& x) {
  // Opset 17 has no Gelu: written out as PyTorch defines it.
  const Tensor y = m(x.example);
  const TensorOptions opts{x.example.dtype(), Device::cpu()};
  auto scalar = [&](const std::string& hint, double v) { return g.initializer(path + "." + hint, full({}, v, opts)); };
  std::string inner;
  if (m.tanh_approximation) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const std::string cube = g.node1("Mul", {g.node1("Mul", {x.name, x.name}, path + ".sq"), x.name}, path + ".cube");
    const std::string sum =
        g.node1("Add", {x.name, g.node1("Mul", {cube, scalar("c", 0.044715)}, path + ".cx")}, path + ".sum");
    inner = g.node1("Tanh", {g.node1("Mul", {sum, scalar("k", 0.7978845608028654)}, path + ".arg")}, path + ".tanh");
  } else {  // 0.5 x (1 + erf(x / sqrt(2)))
    inner =
        g.node1("Erf", {g.node1("Mul", {x.name, scalar("rsqrt2", 0.7071067811865476)}, path + ".arg")}, path + ".erf");
  }
  const std::string one_plus = g.node1("Add", {inner, scalar("one", 1.0)}, path + ".onep");
  const std::string half_x = g.node1("Mul", {x.name, scalar("half", 0.5)}, path + ".halfx");
  return {g.node1("Mul", {half_x, one_plus}, path), y};
}

const model_file::LayerRegistration relu_file{Layer::kRelu, {.build = plain_from_file<nn::ReLU>}};
const onnx::ExporterRegistration<nn::ReLU> relu_onnx{"ReLU", relu_to_onnx};
const model_file::LayerRegistration leaky_relu_file{Layer::kLeakyRelu, {.build = leaky_relu_from_file}};
const onnx::ExporterRegistration<nn::LeakyReLU> leaky_relu_onnx{"LeakyReLU", leaky_relu_to_onnx};
const model_file::LayerRegistration elu_file{Layer::kElu, {.build = elu_from_file}};
const onnx::ExporterRegistration<nn::ELU> elu_onnx{"ELU", elu_to_onnx};
const model_file::LayerRegistration gelu_file{Layer::kGelu, {.build = gelu_from_file}};
const onnx::ExporterRegistration<nn::GELU> gelu_onnx{"GELU", gelu_to_onnx};
const model_file::LayerRegistration sigmoid_file{Layer::kSigmoid, {.build = plain_from_file<nn::Sigmoid>}};
const onnx::ExporterRegistration<nn::Sigmoid> sigmoid_onnx{"Sigmoid", sigmoid_to_onnx};
const model_file::LayerRegistration tanh_file{Layer::kTanh, {.build = plain_from_file<nn::Tanh>}};
const onnx::ExporterRegistration<nn::Tanh> tanh_onnx{"Tanh", tanh_to_onnx};
const model_file::LayerRegistration softmax_file{Layer::kSoftmax, {.build = softmax_from_file}};
const onnx::ExporterRegistration<nn::Softmax> softmax_onnx{"Softmax", softmax_to_onnx};
const model_file::LayerRegistration log_softmax_file{Layer::kLogSoftmax, {.build = log_softmax_from_file}};
const onnx::ExporterRegistration<nn::LogSoftmax> log_softmax_onnx{"LogSoftmax", log_softmax_to_onnx};

}  // namespace
}  // namespace ember
