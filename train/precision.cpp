#include "train/precision.h"

#include <cstdio>

namespace ember::train {

Precision Precision::parse(const std::string& name, const std::string& what) {
  Precision p;
  p.name_ = name;
  if (name == "bf16") {
    p.dtype_ = DType::BFloat16;
  } else if (name == "fp16") {
    p.dtype_ = DType::Float16;
    p.scaler_ = optim::GradScaler();  // float16 gradients underflow without it
  } else {
    EMBER_CHECK(name == "fp32", what, ": '", name, "' is not a precision (expected fp32, bf16 or fp16)");
  }
  return p;
}

void Precision::enter_autocast(std::optional<autocast>& scope, Device dev) const {
  if (dtype_) scope.emplace(dev, *dtype_);
}

void Precision::backward(const Tensor& loss) {
  scaler_.scale(loss).backward();
}

void Precision::unscale_(optim::Optimizer& opt) {
  scaler_.unscale_(opt);
}

void Precision::step(optim::Optimizer& opt) {
  scaler_.step(opt);
}

void Precision::update() {
  scaler_.update();
}

Precision& run_precision() {
  static Precision p;
  return p;
}

}  // namespace ember::train
