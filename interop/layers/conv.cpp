// Conv2d and ConvTranspose2d (layers/conv.h) in model files (conv2d, conv_transpose2d) and in ONNX
// (Conv, ConvTranspose).
#include "layers/conv.h"

#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

std::shared_ptr<nn::Module> conv2d_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& c = l.conv2d();
  const int64_t out = at.required_size(c.has_out_channels(), c.out_channels(), "out_channels");
  at.check(!c.kernel().empty(), "conv2d", "kernel is missing (expected [k] or [kh, kw])");
  nn::Conv2dOptions o{
      .stride = at.size2(c.stride(), "stride", 1, 1),
      .padding = c.same() ? nn::ConvPadding("same") : nn::ConvPadding(at.size2(c.padding(), "padding", 0, 0)),
      .dilation = at.size2(c.dilation(), "dilation", 1, 1),
      .groups = at.size_or(c.has_groups(), c.groups(), 1, "groups"),
      .bias = !c.no_bias()};
  return std::make_shared<nn::Conv2d>(at.channels(x, 4), out, at.size2(c.kernel(), "kernel", 1, 1), o);
}

std::shared_ptr<nn::Module> conv_transpose2d_from_file(const model_file::Site& at, const Layer& l, const Tensor& x) {
  const auto& c = l.conv_transpose2d();
  const int64_t out = at.required_size(c.has_out_channels(), c.out_channels(), "out_channels");
  at.check(!c.kernel().empty(), "conv_transpose2d", "kernel is missing (expected [k] or [kh, kw])");
  nn::ConvTranspose2dOptions o{.stride = at.size2(c.stride(), "stride", 1, 1),
                               .padding = at.size2(c.padding(), "padding", 0, 0),
                               .output_padding = at.size2(c.output_padding(), "output_padding", 0, 0),
                               .dilation = at.size2(c.dilation(), "dilation", 1, 1),
                               .groups = at.size_or(c.has_groups(), c.groups(), 1, "groups"),
                               .bias = !c.no_bias()};
  return std::make_shared<nn::ConvTranspose2d>(at.channels(x, 4), out, at.size2(c.kernel(), "kernel", 1, 1), o);
}

onnx::Traced conv2d_to_onnx(onnx::GraphBuilder& g, nn::Conv2d& m, const std::string& path, const onnx::Traced& x) {
  const auto& o = m.options;
  std::vector<int64_t> pads;
  if (o.padding.same) {
    // PyTorch's split, which Ember's conv2d follows: the odd pixel goes to the bottom/right.
    const int64_t th = o.dilation.h * (m.kernel_size.h - 1), tw = o.dilation.w * (m.kernel_size.w - 1);
    pads = onnx::pads4(th / 2, tw / 2, th - th / 2, tw - tw / 2);
  } else {
    pads = onnx::pads4(o.padding.size.h, o.padding.size.w, o.padding.size.h, o.padding.size.w);
  }
  std::vector<std::string> in{x.name, g.initializer(path + ".weight", m.weight)};
  if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
  return {g.node1("Conv", in, path,
                  {{"kernel_shape", onnx::pair(m.kernel_size)},
                   {"strides", onnx::pair(o.stride)},
                   {"pads", pads},
                   {"dilations", onnx::pair(o.dilation)},
                   {"group", o.groups}}),
          m(x.example)};
}

onnx::Traced conv_transpose2d_to_onnx(onnx::GraphBuilder& g, nn::ConvTranspose2d& m, const std::string& path,
                                      const onnx::Traced& x) {
  const auto& o = m.options;
  std::vector<std::string> in{x.name, g.initializer(path + ".weight", m.weight)};
  if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
  return {g.node1("ConvTranspose", in, path,
                  {{"kernel_shape", onnx::pair(m.kernel_size)},
                   {"strides", onnx::pair(o.stride)},
                   {"pads", onnx::pads4(o.padding.h, o.padding.w, o.padding.h, o.padding.w)},
                   {"output_padding", onnx::pair(o.output_padding)},
                   {"dilations", onnx::pair(o.dilation)},
                   {"group", o.groups}}),
          m(x.example)};
}

const model_file::LayerRegistration conv2d_file{Layer::kConv2D, {.build = conv2d_from_file}};
const onnx::ExporterRegistration<nn::Conv2d> conv2d_onnx{"Conv2d", conv2d_to_onnx};
const model_file::LayerRegistration conv_transpose2d_file{Layer::kConvTranspose2D,
                                                          {.build = conv_transpose2d_from_file}};
const onnx::ExporterRegistration<nn::ConvTranspose2d> conv_transpose2d_onnx{"ConvTranspose2d",
                                                                            conv_transpose2d_to_onnx};

}  // namespace
}  // namespace ember
