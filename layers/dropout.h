// Dropout: zeroes each element with probability p and scales the rest by 1 / (1 - p) in training
// (inverted dropout, core's fused op), drawing its mask from `generator` (the default generator
// when null) so that a seeded run is reproducible; identity in eval mode.
#pragma once

#include "core/generator.h"
#include "layers/module.h"

namespace ember::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  double p;
  Generator* generator;
};

}  // namespace ember::nn
