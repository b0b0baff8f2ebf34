// The elementwise Tensor member shorthands declared in core/tensor.h; each forwards to the free
// function of core/ops/elementwise.h.
#include "core/ops/elementwise.h"

namespace ember {

Tensor Tensor::exp() const {
  return ember::exp(*this);
}
Tensor Tensor::log() const {
  return ember::log(*this);
}
Tensor Tensor::sqrt() const {
  return ember::sqrt(*this);
}
Tensor Tensor::abs() const {
  return ember::abs(*this);
}
Tensor Tensor::pow(double e) const {
  return ember::pow(*this, e);
}
Tensor Tensor::relu() const {
  return ember::relu(*this);
}
Tensor Tensor::sigmoid() const {
  return ember::sigmoid(*this);
}
Tensor Tensor::tanh() const {
  return ember::tanh(*this);
}

}  // namespace ember
