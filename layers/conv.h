// 2-D convolution layers over NCHW inputs, wrapping core's fused conv2d / conv_transpose2d:
// Conv2d (stride, padding including "same", dilation, groups, bias) and ConvTranspose2d (stride,
// padding, output_padding, dilation, groups, bias). Parameter names, layouts and default
// initialisation are PyTorch's: weight [out, in/groups, kh, kw] (transposed: [in, out/groups,
// kh, kw]) from kaiming_uniform with a = sqrt(5), bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
#pragma once

#include "core/generator.h"
#include "core/ops/nn.h"
#include "layers/module.h"
#include "layers/size2.h"

namespace ember::nn {

struct Conv2dOptions {
  Size2 stride = 1;
  ConvPadding padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Conv2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  void reset_parameters(Generator* gen = nullptr);
  std::string type_name() const override { return "Conv2d"; }
  // The options as core's conv2d takes them.
  Conv2dParams params() const;
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  Size2 kernel_size;
  Conv2dOptions options;
  Tensor weight, bias;
};

struct ConvTranspose2dOptions {
  Size2 stride = 1;
  Size2 padding = 0;
  Size2 output_padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
  bool bias = true;
};

class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, ConvTranspose2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  void reset_parameters(Generator* gen = nullptr);
  std::string type_name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override;

  int64_t in_channels, out_channels;
  Size2 kernel_size;
  ConvTranspose2dOptions options;
  Tensor weight, bias;
};

}  // namespace ember::nn
