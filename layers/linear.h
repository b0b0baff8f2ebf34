// Linear (fully connected) layer: y = x W^T + b over the last dim, with PyTorch's parameter
// names (weight [out, in], bias [out]) and default initialisation (kaiming_uniform with
// a = sqrt(5) for the weight, U(-1/sqrt(in), 1/sqrt(in)) for the bias).
#pragma once

#include "core/generator.h"
#include "layers/module.h"

namespace ember::nn {

struct LinearOptions {
  bool bias = true;
};

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});
  Tensor forward(const Tensor& input) override;
  // Re-draws the parameters with the default initialisation.
  void reset_parameters(Generator* gen = nullptr);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;

  int64_t in_features, out_features;
  Tensor weight, bias;
};

// Passes its input through (a placeholder in Sequentials).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& input) override { return input; }
  std::string type_name() const override { return "Identity"; }
};

}  // namespace ember::nn
