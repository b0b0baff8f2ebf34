// Activation layers: parameterless modules over core's elementwise and softmax ops, so that they
// can sit in a Sequential and show up in summary(). Defaults follow PyTorch.
#pragma once

#include <string>

#include "layers/module.h"

namespace ember::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ReLU"; }
};

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope(negative_slope) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  double negative_slope;
};

class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0) : alpha(alpha) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "ELU"; }
  std::string extra_repr() const override;
  double alpha;
};

class GELU : public Module {
 public:
  // "none" (exact, erf) or "tanh" (the tanh approximation), as PyTorch's approximate argument.
  explicit GELU(const std::string& approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override { return tanh_approximation ? "approximate='tanh'" : ""; }
  bool tanh_approximation;
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Sigmoid"; }
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Tanh"; }
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim(dim) {}
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return "LogSoftmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim); }
  int64_t dim;
};

}  // namespace ember::nn
