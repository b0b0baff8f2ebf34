#include "layers/conv.h"

#include <cmath>

#include "core/ops/creation.h"
#include "layers/functional.h"
#include "layers/init.h"

namespace ember::nn {

namespace {

void check_channels(const char* layer, int64_t in, int64_t out, Size2 k, int64_t groups) {
  EMBER_CHECK(in > 0 && out > 0, layer, ": in_channels (", in, ") and out_channels (", out, ") must be positive");
  EMBER_CHECK(k.h > 0 && k.w > 0, layer, ": kernel_size must be positive, got ", k.str());
  EMBER_CHECK(groups > 0, layer, ": groups must be positive, got ", groups);
  EMBER_CHECK(in % groups == 0, layer, ": in_channels (", in, ") must be divisible by groups (", groups, ")");
  EMBER_CHECK(out % groups == 0, layer, ": out_channels (", out, ") must be divisible by groups (", groups, ")");
}

// PyTorch's _ConvNd.reset_parameters: the weight from kaiming_uniform(a = sqrt(5)), the bias from
// U(-b, b) with b = 1 / sqrt(fan_in of the weight tensor).
void reset_conv(Tensor& weight, Tensor& bias, Generator* gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, gen);
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).fan_in;
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

}  // namespace

Conv2d::Conv2d(int64_t in, int64_t out, Size2 k, Conv2dOptions o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels("Conv2d", in, out, k, o.groups);
  EMBER_CHECK(o.stride.h > 0 && o.stride.w > 0, "Conv2d: stride must be positive, got ", o.stride.str());
  EMBER_CHECK(o.dilation.h > 0 && o.dilation.w > 0, "Conv2d: dilation must be positive, got ", o.dilation.str());
  EMBER_CHECK(o.padding.same || (o.padding.size.h >= 0 && o.padding.size.w >= 0),
              "Conv2d: padding must be non-negative, got ", o.padding.str());
  EMBER_CHECK(!o.padding.same || (o.stride.h == 1 && o.stride.w == 1),
              "Conv2d: padding='same' is not supported for strided convolutions (stride ", o.stride.str(), ")");
  weight = empty({out, in / o.groups, k.h, k.w});
  if (o.bias) bias = empty({out});
  reset_parameters();
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
}

void Conv2d::reset_parameters(Generator* gen) {
  reset_conv(weight, bias, gen);
}

Conv2dParams Conv2d::params() const {
  Conv2dParams p;
  p.stride = options.stride.arr();
  p.padding = options.padding.size.arr();
  p.dilation = options.dilation.arr();
  p.groups = options.groups;
  p.same_padding = options.padding.same;
  return p;
}

Tensor Conv2d::forward(const Tensor& input) {
  return F::conv2d(input, weight, bias, params());
}

std::string Conv2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.str() + ", stride=" + options.stride.str();
  if (options.padding.same || !(options.padding.size == Size2(0))) s += ", padding=" + options.padding.str();
  if (!(options.dilation == Size2(1))) s += ", dilation=" + options.dilation.str();
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=false";
  return s;
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Size2 k, ConvTranspose2dOptions o)
    : in_channels(in), out_channels(out), kernel_size(k), options(o) {
  check_channels("ConvTranspose2d", in, out, k, o.groups);
  EMBER_CHECK(o.stride.h > 0 && o.stride.w > 0, "ConvTranspose2d: stride must be positive, got ", o.stride.str());
  EMBER_CHECK(o.dilation.h > 0 && o.dilation.w > 0, "ConvTranspose2d: dilation must be positive, got ",
              o.dilation.str());
  EMBER_CHECK(o.padding.h >= 0 && o.padding.w >= 0, "ConvTranspose2d: padding must be non-negative, got ",
              o.padding.str());
  EMBER_CHECK(o.output_padding.h >= 0 && o.output_padding.w >= 0 &&
                  (o.output_padding.h < o.stride.h || o.output_padding.h < o.dilation.h) &&
                  (o.output_padding.w < o.stride.w || o.output_padding.w < o.dilation.w),
              "ConvTranspose2d: output_padding ", o.output_padding.str(),
              " must be smaller than either stride or dilation (stride ", o.stride.str(), ", dilation ",
              o.dilation.str(), ")");
  weight = empty({in, out / o.groups, k.h, k.w});
  if (o.bias) bias = empty({out});
  reset_parameters();
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
}

void ConvTranspose2d::reset_parameters(Generator* gen) {
  reset_conv(weight, bias, gen);
}

Tensor ConvTranspose2d::forward(const Tensor& input) {
  ConvTranspose2dParams p;
  p.stride = options.stride.arr();
  p.padding = options.padding.arr();
  p.output_padding = options.output_padding.arr();
  p.dilation = options.dilation.arr();
  p.groups = options.groups;
  return F::conv_transpose2d(input, weight, bias, p);
}

std::string ConvTranspose2d::extra_repr() const {
  std::string s = std::to_string(in_channels) + ", " + std::to_string(out_channels) +
                  ", kernel_size=" + kernel_size.str() + ", stride=" + options.stride.str();
  if (!(options.padding == Size2(0))) s += ", padding=" + options.padding.str();
  if (!(options.output_padding == Size2(0))) s += ", output_padding=" + options.output_padding.str();
  if (!(options.dilation == Size2(1))) s += ", dilation=" + options.dilation.str();
  if (options.groups != 1) s += ", groups=" + std::to_string(options.groups);
  if (!bias.defined()) s += ", bias=false";
  return s;
}

}  // namespace ember::nn
