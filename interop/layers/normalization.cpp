// BatchNorm1d/2d and LayerNorm (layers/normalization.h) in model files (batch_norm, layer_norm)
// and in ONNX (BatchNormalization, LayerNormalization).
#include "layers/normalization.h"

#include "core/ops.h"
#include "core/shape.h"
#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

// 1-D over [N, C] or [N, C, L], 2-D over [N, C, H, W]: which, from the input.
std::shared_ptr<nn::Module> batch_norm_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& b = l.batch_norm();
  const nn::BatchNormOptions o{.eps = at.real_or(b.has_eps(), b.eps(), 1e-5, "eps", b.eps() > 0, "a finite number > 0"),
                               .momentum = at.real_or(b.has_momentum(), b.momentum(), 0.1, "momentum",
                                                      b.momentum() >= 0 && b.momentum() <= 1, "a number in [0, 1]")};
  if (x.dim() == 4) return std::make_shared<nn::BatchNorm2d>(x.size(1), o);
  at.check(x.dim() == 2 || x.dim() == 3, "batch_norm",
           "its input is " + shape_str(x.shape()) + " (expected [N, C], [N, C, L] or [N, C, H, W])");
  return std::make_shared<nn::BatchNorm1d>(x.size(1), o);
}

std::shared_ptr<nn::Module> layer_norm_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& n = l.layer_norm();
  const int64_t k = at.size_or(n.has_last_dims(), n.last_dims(), 1, "last_dims");
  at.check(k < x.dim(), "layer_norm",
           "last_dims " + std::to_string(k) + " for input " + shape_str(x.shape()) + " (expected 1 to rank - 1)");
  const Shape shape(x.shape().end() - k, x.shape().end());
  return std::make_shared<nn::LayerNorm>(
      shape,
      nn::LayerNormOptions{.eps = at.real_or(n.has_eps(), n.eps(), 1e-5, "eps", n.eps() > 0, "a finite number > 0")});
}

onnx::Traced batch_norm_to_onnx(onnx::GraphBuilder& g, nn::BatchNormBase& m, const std::string& path,
                                const onnx::Traced& x) {
  EMBER_CHECK(m.options.track_running_stats, "ONNX export: ", m.type_name(), " '", path,
              "' keeps no running statistics, so in evaluation it normalises with each batch's own: "
              "ONNX's BatchNormalization needs the running mean and variance");
  const TensorOptions f32{m.running_mean.dtype(), Device::cpu()};
  const Tensor scale = m.weight.defined() ? m.weight : ones({m.num_features}, f32);
  const Tensor shift = m.bias.defined() ? m.bias : zeros({m.num_features}, f32);
  return {g.node1("BatchNormalization",
                  {x.name, g.initializer(path + ".weight", scale), g.initializer(path + ".bias", shift),
                   g.initializer(path + ".running_mean", m.running_mean),
                   g.initializer(path + ".running_var", m.running_var)},
                  path, {{"epsilon", static_cast<float>(m.options.eps)}}),
          m(x.example)};
}

onnx::Traced layer_norm_to_onnx(onnx::GraphBuilder& g, nn::LayerNorm& m, const std::string& path,
                                const onnx::Traced& x) {
  const TensorOptions f32{x.example.dtype(), Device::cpu()};
  const Tensor scale = m.weight.defined() ? m.weight : ones(m.normalized_shape, f32);
  std::vector<std::string> in{x.name, g.initializer(path + ".weight", scale)};
  if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
  return {g.node1("LayerNormalization", in, path,
                  {{"axis", -static_cast<int64_t>(m.normalized_shape.size())},
                   {"epsilon", static_cast<float>(m.options.eps)}}),
          m(x.example)};
}

const model_file::LayerRegistration batch_norm_file{Layer::kBatchNorm, {.build = batch_norm_from_file}};
// BatchNorm1d and BatchNorm2d both derive from BatchNormBase.
const onnx::ExporterRegistration<nn::BatchNormBase> batch_norm_onnx{"BatchNorm1d/2d", batch_norm_to_onnx};
const model_file::LayerRegistration layer_norm_file{Layer::kLayerNorm, {.build = layer_norm_from_file}};
const onnx::ExporterRegistration<nn::LayerNorm> layer_norm_onnx{"LayerNorm", layer_norm_to_onnx};

}  // namespace
}  // namespace ember
