// Copies and conversions as Tensor members: contiguous, clone, to, copy_, fill_, and the reads
// (item, to_vector) that convert through them. copy_ and fill_ go through the copy and fill
// stubs (core/copy.h) and record autograd nodes.
#include "core/copy.h"

#include <cstring>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/host_waits.h"
#include "core/ops/reduce.h"
#include "core/tensor.h"

namespace ember {

double Tensor::item() const {
  EMBER_CHECK(numel() == 1, "item: expected a tensor with one element but got shape ", shape_str(shape()));
  Tensor c = to(Device::cpu(), DType::Float64);
  return *static_cast<const double*>(c.raw_data());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(Device::cpu(), dtype_of<T>()).contiguous();
  std::vector<T> v(static_cast<size_t>(c.numel()));
  if (!v.empty()) std::memcpy(static_cast<void*>(v.data()), c.raw_data(), v.size() * sizeof(T));
  return v;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;
// std::vector<bool> is bit-packed: go through one byte per element.
template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  const std::vector<uint8_t> bytes = to(Device::cpu(), DType::Bool).to_vector<uint8_t>();
  return std::vector<bool>(bytes.begin(), bytes.end());
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), options());
  copy_stub(device())(out, *this);
  autograd::record(
      "CloneBackward", {*this}, {out},
      [](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> { return {g[0]}; });
  return out;
}

Tensor Tensor::to(Device d) const {
  return to(d, dtype());
}

Tensor Tensor::to(DType t) const {
  return to(device(), t);
}

Tensor Tensor::to(Device d, DType t) const {
  if (d == device() && t == dtype()) return *this;
  Tensor out = empty(shape(), {t, d});
  {
    NoGradGuard ng;
    out.copy_(*this);
  }
  if (is_floating(t)) {
    Device src_dev = device();
    DType src_dt = dtype();
    autograd::record("ToBackward", {*this}, {out},
                     [src_dev, src_dt](const std::vector<Tensor>& g, const std::vector<bool>&) -> std::vector<Tensor> {
                       return {g[0].to(src_dev, src_dt)};
                     });
  }
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  EMBER_CHECK(defined(), "copy_: called on an undefined tensor");
  EMBER_CHECK(src.defined(), "copy_: the source tensor is undefined");
  Tensor s = src;
  if (s.shape() != shape()) {
    EMBER_CHECK(s.dim() <= dim(), "copy_: source shape ", shape_str(s.shape()), " cannot be broadcast to ",
                shape_str(shape()));
    NoGradGuard ng;
    s = s.expand(shape());
  }
  const bool track = GradMode::is_enabled() && (requires_grad() || src.requires_grad());
  if (track) autograd::check_inplace(*this, "copy_");
  Device worker = device().is_cuda() ? device() : s.device();
  if (device().is_cpu() && !s.device().is_cpu()) count_host_wait();
  copy_stub(worker)(*this, s);
  bump_version();
  if (track) {
    Shape src_shape = src.shape();
    Device src_dev = src.device();
    DType src_dt = src.dtype();
    autograd::record_inplace("CopyBackward", *this, {src},
                             [src_shape, src_dev, src_dt](const std::vector<Tensor>& g,
                                                          const std::vector<bool>& needs) -> std::vector<Tensor> {
                               std::vector<Tensor> r(2);
                               if (needs[1]) r[1] = sum_to(g[0], src_shape).to(src_dev, src_dt);
                               return r;  // the old value of self gets no gradient
                             });
  }
  return *this;
}

Tensor& Tensor::fill_(double value) {
  EMBER_CHECK(defined(), "fill_: called on an undefined tensor");
  if (GradMode::is_enabled() && requires_grad()) {
    autograd::check_inplace(*this, "fill_");
    fill_stub(device())(*this, value);
    bump_version();
    autograd::record_inplace(
        "FillBackward", *this, {},
        [](const std::vector<Tensor>&, const std::vector<bool>&) -> std::vector<Tensor> { return {Tensor()}; });
    return *this;
  }
  fill_stub(device())(*this, value);
  bump_version();
  return *this;
}

Tensor& Tensor::zero_() {
  return fill_(0.0);
}

}  // namespace ember
