// Elementwise math with NumPy broadcasting: arithmetic, comparisons, activations, casts.
// Binary ops promote dtypes as PyTorch does for tensor-tensor operands; a double scalar takes
// the tensor's dtype. In-place variants write into their first argument and check that the
// broadcast result has its shape.
#pragma once

#include <optional>

#include "core/tensor.h"

namespace ember {

// The broadcast shape of two shapes; an ember::Error naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rsub(const Tensor& a, double b);  // b - a
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond: bool

Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor log1p(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor square(const Tensor& a);
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);

Tensor relu(const Tensor& a);
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
Tensor elu(const Tensor& a, double alpha = 1.0);
Tensor gelu(const Tensor& a, bool tanh_approximation = false);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
// clamp(a, min_val, max_val) with no gradient at the limits, as torch.nn.functional.hardtanh.
Tensor hardtanh(const Tensor& a, double min_val = -1.0, double max_val = 1.0);

// Comparisons return bool tensors; not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& a);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);  // same shape and values

// In place (autograd-aware where PyTorch is).
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor& sub_(Tensor& a, const Tensor& b, double alpha = 1.0);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& add_(Tensor& a, double b);
Tensor& mul_(Tensor& a, double b);
Tensor& clamp_(Tensor& a, std::optional<double> min, std::optional<double> max);
Tensor& relu_(Tensor& a);
Tensor& neg_(Tensor& a);
Tensor& masked_fill_(Tensor& a, const Tensor& mask, double value);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace ember
