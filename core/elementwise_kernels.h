// Kernel interface for elementwise ops. Operands arrive broadcast to the output's shape and
// already converted to the compute dtype (comparisons and logical ops write bool outputs). Each
// device registers one kernel per family; the op enum picks the math inside it. The gradient
// families exist so that a backward pass is one fused loop (g * f'(x)) instead of a chain of
// temporaries; they see the saved input x or the saved output y of the forward op, as noted.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

enum class BinaryOp {
  Add,  // a + alpha * b
  Sub,  // a - alpha * b
  Mul,
  Div,      // floating dtypes only
  Maximum,  // NaN-propagating
  Minimum,
  Pow,
};

enum class UnaryOp {
  Neg,
  Abs,
  Sign,  // sign(NaN) = 0
  Exp,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Square,
  Clamp,  // p0 = min, p1 = max (-inf / inf when absent)
  Pow,    // x ^ p0 (integer dtypes: p0 is a non-negative integer)
};

// out = grad * d op(x) / dx. Floating dtypes only.
enum class UnaryGradOp {
  Abs,     // from x; 0 at x = 0
  Exp,     // from y
  Log,     // from x
  Log1p,   // from x
  Sqrt,    // from y
  Rsqrt,   // from y
  Square,  // from x
  Clamp,   // from x; passes where p0 <= x <= p1
  Pow,     // from x; exponent p0
};

// Activations; floating dtypes except Relu, which takes any numeric dtype.
enum class ActivationOp {
  Relu,
  LeakyRelu,  // p0 = negative slope
  Elu,        // p0 = alpha
  Gelu,       // exact: x * Phi(x)
  GeluTanh,   // tanh approximation
  Sigmoid,
  Tanh,
  Softplus,  // p0 = beta, p1 = threshold
  Hardtanh,  // p0 = min_val, p1 = max_val; passes where p0 < x < p1
};

// The saved tensor each activation's backward reads: the output y for Relu (so that relu_ can
// use it), Sigmoid and Tanh; the input x for the rest.
inline bool activation_grad_uses_output(ActivationOp op) {
  return op == ActivationOp::Relu || op == ActivationOp::Sigmoid || op == ActivationOp::Tanh;
}

// out = f(grad, a, b) for the gradient of one operand of a binary op. Floating dtypes only.
enum class BinaryGradOp {
  // As PyTorch: grad / 2 to each side where a == b, else grad to the side that won (and to
  // both where a NaN makes every comparison false).
  MaximumA,
  MaximumB,
  MinimumA,
  MinimumB,
  PowBase,      // grad * b * a^(b-1), 0 where b == 0
  PowExponent,  // grad * a^b * ln a, 0 where a == 0 and b >= 0
  DivDivisor,   // -grad * a / b^2
};

enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge };

enum class LogicalOp { And, Or, Not };  // bool operands (b unused for Not)

// For the binary, unary and activation families out may alias a (the in-place ops).
using BinaryFn = void(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha);

// Add's and Sub's alpha in the compute type T, as every device's kernel takes it. An integer type's
// goes through int64_t, whose conversion to T wraps as the arithmetic does (sub on uint8 is add
// with alpha -1, i.e. 255); -1.0 converted straight to uint8 would be undefined behaviour.
template <typename T>
T binary_alpha(double alpha) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<int64_t>(alpha));
  else
    return static_cast<T>(alpha);
}
using UnaryFn = void(UnaryOp op, const Tensor& out, const Tensor& a, double p0, double p1);
using UnaryGradFn = void(UnaryGradOp op, const Tensor& out, const Tensor& grad, const Tensor& saved, double p0,
                         double p1);
using ActivationFn = void(ActivationOp op, const Tensor& out, const Tensor& a, double p0, double p1);
using ActivationGradFn = void(ActivationOp op, const Tensor& out, const Tensor& grad, const Tensor& saved, double p0,
                              double p1);
using BinaryGradFn = void(BinaryGradOp op, const Tensor& out, const Tensor& grad, const Tensor& a, const Tensor& b);
using CompareFn = void(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b);  // out: bool
using LogicalFn = void(LogicalOp op, const Tensor& out, const Tensor& a, const Tensor& b);  // all bool
// out = cond ? a : b; cond is bool, a/b/out share a dtype. out may alias b (masked_fill_).
using WhereFn = void(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// out (bool) = a == b or |a - b| <= atol + rtol * |b| with |a - b| finite (NaN is never close).
using IsCloseFn = void(const Tensor& out, const Tensor& a, const Tensor& b, double rtol, double atol);

EMBER_DECLARE_STUB(binary_stub, BinaryFn);
EMBER_DECLARE_STUB(unary_stub, UnaryFn);
EMBER_DECLARE_STUB(unary_grad_stub, UnaryGradFn);
EMBER_DECLARE_STUB(activation_stub, ActivationFn);
EMBER_DECLARE_STUB(activation_grad_stub, ActivationGradFn);
EMBER_DECLARE_STUB(binary_grad_stub, BinaryGradFn);
EMBER_DECLARE_STUB(compare_stub, CompareFn);
EMBER_DECLARE_STUB(logical_stub, LogicalFn);
EMBER_DECLARE_STUB(where_stub, WhereFn);
EMBER_DECLARE_STUB(isclose_stub, IsCloseFn);

}  // namespace ember
