#include "layers/linear.h"

#include <cmath>

#include "core/ops/creation.h"
#include "layers/functional.h"
#include "layers/init.h"

namespace ember::nn {

Linear::Linear(int64_t in, int64_t out, LinearOptions options) : in_features(in), out_features(out) {
  EMBER_CHECK(in >= 0 && out >= 0, "Linear: in_features (", in, ") and out_features (", out, ") must be non-negative");
  weight = empty({out, in});
  if (options.bias) bias = empty({out});
  reset_parameters();
  register_parameter("weight", &weight);
  register_parameter("bias", &bias);
}

void Linear::reset_parameters(Generator* gen) {
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, gen);
  if (bias.defined()) {
    const double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Linear::forward(const Tensor& input) {
  return F::linear(input, weight, bias);
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

}  // namespace ember::nn
