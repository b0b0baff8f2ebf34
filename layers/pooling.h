// Pooling layers over NCHW inputs, wrapping core's one-pass pooling ops: MaxPool2d and AvgPool2d
// (kernel, stride defaulting to the kernel, padding, ceil_mode; count_include_pad for averages)
// and AdaptiveAvgPool2d (a fixed output size).
#pragma once

#include "core/ops/nn.h"
#include "layers/module.h"
#include "layers/size2.h"

namespace ember::nn {

struct Pool2dOptions {
  Size2 stride = 0;  // 0 = the kernel size
  Size2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;  // AvgPool2d only
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel_size, Pool2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  // The options as core's max_pool2d takes them (checked again).
  Pool2dParams params() const;
  Size2 kernel_size;
  Pool2dOptions options;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, Pool2dOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Size2 kernel_size;
  Pool2dOptions options;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size) : output_size(output_size) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override { return "output_size=" + output_size.str(); }
  Size2 output_size;
};

}  // namespace ember::nn
