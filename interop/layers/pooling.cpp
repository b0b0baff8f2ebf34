// MaxPool2d, AvgPool2d and AdaptiveAvgPool2d (layers/pooling.h) in model files (max_pool2d,
// avg_pool2d, adaptive_avg_pool2d) and in ONNX (MaxPool, AveragePool, GlobalAveragePool).
#include "layers/pooling.h"

#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

// max_pool2d and avg_pool2d: kernel, stride (default: the kernel), padding, ceil_mode.
nn::Pool2dOptions pool_options(const model_file::Site& at, const train_file::Pool& p) {
  at.check(!p.kernel().empty(), at.kind, "kernel is missing (expected [k] or [kh, kw])");
  return {.stride = at.size2(p.stride(), "stride", 0, 1),
          .padding = at.size2(p.padding(), "padding", 0, 0),
          .ceil_mode = p.ceil_mode()};
}

std::shared_ptr<nn::Module> max_pool2d_from_file(const model_file::Site& at, const Layer& l, const Tensor&) {
  const nn::Pool2dOptions o = pool_options(at, l.max_pool2d());
  return std::make_shared<nn::MaxPool2d>(at.size2(l.max_pool2d().kernel(), "kernel", 1, 1), o);
}

std::shared_ptr<nn::Module> avg_pool2d_from_file(const model_file::Site& at, const Layer& l, const Tensor&) {
  const nn::Pool2dOptions o = pool_options(at, l.avg_pool2d());
  return std::make_shared<nn::AvgPool2d>(at.size2(l.avg_pool2d().kernel(), "kernel", 1, 1), o);
}

std::shared_ptr<nn::Module> adaptive_avg_pool2d_from_file(const model_file::Site& at, const Layer& l, const Tensor&) {
  at.check(!l.adaptive_avg_pool2d().output().empty(), "adaptive_avg_pool2d",
           "output is missing (expected [n] or [h, w])");
  return std::make_shared<nn::AdaptiveAvgPool2d>(at.size2(l.adaptive_avg_pool2d().output(), "output", 1, 1));
}

onnx::Traced pool(onnx::GraphBuilder& g, nn::Module& m, const char* op, nn::Size2 kernel, const nn::Pool2dOptions& o,
                  bool average, const std::string& path, const onnx::Traced& x) {
  const nn::Size2 stride = o.stride == nn::Size2(0) ? kernel : o.stride;
  std::vector<onnx::Attribute> attrs{{"kernel_shape", onnx::pair(kernel)},
                                     {"strides", onnx::pair(stride)},
                                     {"pads", onnx::pads4(o.padding.h, o.padding.w, o.padding.h, o.padding.w)},
                                     {"ceil_mode", int64_t{o.ceil_mode ? 1 : 0}}};
  if (average) attrs.push_back({"count_include_pad", int64_t{o.count_include_pad ? 1 : 0}});
  return {g.node1(op, {x.name}, path, attrs), m(x.example)};
}

onnx::Traced max_pool2d_to_onnx(onnx::GraphBuilder& g, nn::MaxPool2d& m, const std::string& path,
                                const onnx::Traced& x) {
  return pool(g, m, "MaxPool", m.kernel_size, m.options, false, path, x);
}

onnx::Traced avg_pool2d_to_onnx(onnx::GraphBuilder& g, nn::AvgPool2d& m, const std::string& path,
                                const onnx::Traced& x) {
  return pool(g, m, "AveragePool", m.kernel_size, m.options, true, path, x);
}

onnx::Traced adaptive_avg_pool2d_to_onnx(onnx::GraphBuilder& g, nn::AdaptiveAvgPool2d& m, const std::string& path,
                                         const onnx::Traced& x) {
  const Tensor y = m(x.example);
  const int64_t H = x.example.size(-2), W = x.example.size(-1), OH = y.size(-2), OW = y.size(-1);
  if (OH == 1 && OW == 1) return {g.node1("GlobalAveragePool", {x.name}, path), y};
  // Equal windows exist only when the output size divides the input's.
  EMBER_CHECK(H % OH == 0 && W % OW == 0, "ONNX export: AdaptiveAvgPool2d '", path, "' maps ", H, "x", W, " to ", OH,
              "x", OW,
              ", whose windows are unequal: ONNX has no adaptive pooling (expected an output "
              "size that divides the input size, or 1x1)");
  return {g.node1("AveragePool", {x.name}, path,
                  {{"kernel_shape", std::vector<int64_t>{H / OH, W / OW}},
                   {"strides", std::vector<int64_t>{H / OH, W / OW}}}),
          y};
}

const model_file::LayerRegistration max_pool2d_file{Layer::kMaxPool2D, {.build = max_pool2d_from_file}};
const onnx::ExporterRegistration<nn::MaxPool2d> max_pool2d_onnx{"MaxPool2d", max_pool2d_to_onnx};
const model_file::LayerRegistration avg_pool2d_file{Layer::kAvgPool2D, {.build = avg_pool2d_from_file}};
const onnx::ExporterRegistration<nn::AvgPool2d> avg_pool2d_onnx{"AvgPool2d", avg_pool2d_to_onnx};
const model_file::LayerRegistration adaptive_avg_pool2d_file{Layer::kAdaptiveAvgPool2D,
                                                             {.build = adaptive_avg_pool2d_from_file}};
const onnx::ExporterRegistration<nn::AdaptiveAvgPool2d> adaptive_avg_pool2d_onnx{"AdaptiveAvgPool2d",
                                                                                 adaptive_avg_pool2d_to_onnx};

}  // namespace
}  // namespace ember
