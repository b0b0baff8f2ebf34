// Finite-difference gradient check used by every differentiable op's tests: compares the
// analytical gradient from backward() with central differences in float64 and reports the worst
// element (input, index, analytical, numerical) when they disagree.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // describes the worst mismatch when !ok
  double max_abs_error = 0.0;
};

// `fn` maps the inputs to one output tensor (any shape); the check uses a random fixed
// projection of it so that every output element contributes. Inputs must be float64 and the
// ones to check must require grad.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions opts = {});

}  // namespace ember
