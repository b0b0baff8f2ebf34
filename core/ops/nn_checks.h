// Argument checks shared by the fused NN op files (conv, pooling, norms, dropout,
// cross-entropy), so that every op words the same mistake the same way, and the geometries that
// more than one op file derives from checked arguments. Internal to core/ops.
#pragma once

#include "core/error.h"
#include "core/nn_kernels.h"
#include "core/ops/nn.h"
#include "core/tensor.h"

namespace ember::nn_detail {

inline void check_defined(const Tensor& t, const char* op, const char* what) {
  EMBER_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

// A float32/float64 tensor of `ndim` dims (any when ndim < 0).
inline void check_float_input(const Tensor& t, const char* op, const char* what) {
  check_defined(t, op, what);
  EMBER_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64, op, ": ", what,
              " must be float32 or float64, got ", dtype_name(t.dtype()));
}

// `t` (a parameter of the op) must share the input's dtype and device.
inline void check_like_input(const Tensor& t, const Tensor& input, const char* op, const char* what) {
  check_defined(t, op, what);
  EMBER_CHECK(t.dtype() == input.dtype(), op, ": ", what, " dtype ", dtype_name(t.dtype()),
              " does not match the input's ", dtype_name(input.dtype()));
  EMBER_CHECK(t.device() == input.device(), op, ": ", what, " is on ", t.device(), " but the input is on ",
              input.device());
}

// An optional per-channel vector: undefined, or [n] like the input.
inline void check_channel_vector(const Tensor& t, int64_t n, const Tensor& input, const char* op, const char* what) {
  if (!t.defined()) return;
  check_like_input(t, input, op, what);
  EMBER_CHECK(t.dim() == 1 && t.size(0) == n, op, ": ", what, " must have shape [", n, "], got ", shape_str(t.shape()));
}

// A contiguous, history-free alias (or copy) for a kernel to read.
inline Tensor raw(const Tensor& t) {
  if (!t.defined()) return t;
  return t.detach().contiguous();
}

// conv2d's checks and output geometry (core/ops/conv.cpp); `op` names the caller in messages.
ConvGeometry conv2d_geometry(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dParams& p,
                             const char* op);
// Pooling's geometry over a [..., H, W] shape whose last two dims are non-zero (core/ops/pool.cpp).
Pool2dGeometry pool2d_geometry(const Shape& shape, const Pool2dParams& p, const char* op);

}  // namespace ember::nn_detail
