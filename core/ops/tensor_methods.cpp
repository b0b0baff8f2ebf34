// Tensor member shorthands for the ops every file uses; each forwards to the free function in
// core/ops/. Op families that own more methods define them next to their free functions.
#include "core/ops.h"

namespace ember {

Tensor Tensor::add(const Tensor& o, double alpha) const {
  return ember::add(*this, o, alpha);
}
Tensor Tensor::sub(const Tensor& o, double alpha) const {
  return ember::sub(*this, o, alpha);
}
Tensor Tensor::mul(const Tensor& o) const {
  return ember::mul(*this, o);
}
Tensor Tensor::div(const Tensor& o) const {
  return ember::div(*this, o);
}
Tensor& Tensor::add_(const Tensor& o, double alpha) {
  return ember::add_(*this, o, alpha);
}
Tensor& Tensor::sub_(const Tensor& o, double alpha) {
  return ember::sub_(*this, o, alpha);
}
Tensor& Tensor::mul_(const Tensor& o) {
  return ember::mul_(*this, o);
}
Tensor& Tensor::div_(const Tensor& o) {
  return ember::div_(*this, o);
}
Tensor& Tensor::add_(double s) {
  return ember::add_(*this, s);
}
Tensor& Tensor::mul_(double s) {
  return ember::mul_(*this, s);
}
Tensor Tensor::neg() const {
  return ember::neg(*this);
}
Tensor Tensor::sum() const {
  return ember::sum(*this);
}
Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim) const {
  return ember::sum(*this, std::move(dims), keepdim);
}
Tensor Tensor::mean() const {
  return ember::mean(*this);
}
Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim) const {
  return ember::mean(*this, std::move(dims), keepdim);
}

}  // namespace ember
