#include "layers/activation.h"

#include <sstream>

#include "layers/functional.h"

namespace ember::nn {

namespace {
std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

Tensor ReLU::forward(const Tensor& input) {
  return F::relu(input);
}

Tensor LeakyReLU::forward(const Tensor& input) {
  return F::leaky_relu(input, negative_slope);
}
std::string LeakyReLU::extra_repr() const {
  return "negative_slope=" + num(negative_slope);
}

Tensor ELU::forward(const Tensor& input) {
  return F::elu(input, alpha);
}
std::string ELU::extra_repr() const {
  return "alpha=" + num(alpha);
}

GELU::GELU(const std::string& approximate) : tanh_approximation(approximate == "tanh") {
  EMBER_CHECK(approximate == "none" || approximate == "tanh", "GELU: approximate must be 'none' or 'tanh', got '",
              approximate, "'");
}
Tensor GELU::forward(const Tensor& input) {
  return F::gelu(input, tanh_approximation);
}

Tensor Sigmoid::forward(const Tensor& input) {
  return F::sigmoid(input);
}

Tensor Tanh::forward(const Tensor& input) {
  return F::tanh(input);
}

Tensor Softmax::forward(const Tensor& input) {
  return F::softmax(input, dim);
}

Tensor LogSoftmax::forward(const Tensor& input) {
  return F::log_softmax(input, dim);
}

}  // namespace ember::nn
