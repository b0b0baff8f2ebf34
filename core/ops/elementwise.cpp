#include "core/ops/elementwise.h"

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/elementwise_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/reduce.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

// ------------------------------------------------------------ argument checks and helpers

void check_defined(const Tensor& t, const char* op) {
  EMBER_CHECK(t.defined(), op, ": undefined tensor argument");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op);
  check_defined(b, op);
  EMBER_CHECK(a.device() == b.device(), op, ": tensors are on different devices (", a.device(), " and ", b.device(),
              ")");
}

bool is_math_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64 || t == DType::UInt8;
}

// Arithmetic runs in float32/float64/int32/int64/uint8; bool and the 16-bit storage types are
// refused with the op's name.
void check_math_dtype(DType t, const char* op) {
  EMBER_CHECK(is_math_dtype(t), op, ": dtype ", dtype_name(t),
              " is not supported (expected float32, float64, int32, int64 or uint8)");
}

// The dtype a floating-point function of `t` computes in: integer inputs become float32, as in
// PyTorch.
DType float_dtype(const Tensor& t, const char* op) {
  const DType d = t.dtype();
  if (d == DType::Float32 || d == DType::Float64) return d;
  EMBER_CHECK(is_integral(d), op, ": dtype ", dtype_name(d), " is not supported (expected float32 or float64)");
  return DType::Float32;
}

bool is_integral_value(double v) {
  return std::isfinite(v) && v == std::trunc(v);
}

// The dtype a double operand takes next to tensor t: the tensor's, except that an integer tensor
// meeting a non-integer value computes in float32 (and a bool tensor meeting an integer in int64).
DType scalar_dtype(const Tensor& t, double v) {
  const DType d = t.dtype();
  if (is_floating(d)) return d;
  if (!is_integral_value(v)) return DType::Float32;
  return d == DType::Bool ? DType::Int64 : d;
}

Tensor scalar_like(double v, const Tensor& t) {
  return full({}, v, {scalar_dtype(t, v), t.device()});
}

Tensor cast_expand(const Tensor& t, const Shape& shape, DType dt) {
  NoGradGuard ng;
  Tensor r = t.dtype() == dt ? t : t.to(dt);
  return r.shape() == shape ? r : r.expand(shape);
}

// The gradient for an input of `shape` and dtype `dt` from a gradient of the broadcast shape.
Tensor reduce_grad(const Tensor& g, const Shape& shape, DType dt) {
  Tensor r = sum_to(g, shape);
  return r.dtype() == dt ? r : r.to(dt);
}

struct InputMeta {
  Shape shape;
  DType dtype;
};

InputMeta meta_of(const Tensor& t) {
  return {t.shape(), t.dtype()};
}

// ------------------------------------------------------------ kernel runners (no autograd)

Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b, double alpha, DType dt, const char* name) {
  if (dt == DType::Float16 || dt == DType::BFloat16) {
    // Storage types (core/dtype.h): the arithmetic in float32, the result rounded back. This is
    // what lets autograd sum two 16-bit gradients (a parameter's cast read by two ops).
    Tensor wide = run_binary(op, a, b, alpha, DType::Float32, name);
    NoGradGuard ng;
    return wide.to(dt);
  }
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  check_math_dtype(dt, name);
  Tensor out = empty(shape, {dt, a.device()});
  binary_stub(a.device())(op, out, cast_expand(a, shape, dt), cast_expand(b, shape, dt), alpha);
  return out;
}

Tensor run_unary(UnaryOp op, const Tensor& a, DType dt, double p0 = 0, double p1 = 0) {
  Tensor out = empty(a.shape(), {dt, a.device()});
  unary_stub(a.device())(op, out, cast_expand(a, a.shape(), dt), p0, p1);
  return out;
}

Tensor run_unary_grad(UnaryGradOp op, const Tensor& g, const Tensor& saved, double p0 = 0, double p1 = 0) {
  Tensor out = empty(g.shape(), g.options());
  unary_grad_stub(g.device())(op, out, g, cast_expand(saved, g.shape(), g.dtype()), p0, p1);
  return out;
}

Tensor run_activation_grad(ActivationOp op, const Tensor& g, const Tensor& saved, double p0, double p1) {
  Tensor out = empty(g.shape(), g.options());
  activation_grad_stub(g.device())(op, out, g, cast_expand(saved, g.shape(), g.dtype()), p0, p1);
  return out;
}

// f(g, a, b) with a and b broadcast to g's shape and converted to its dtype.
Tensor run_binary_grad(BinaryGradOp op, const Tensor& g, const Tensor& a, const Tensor& b) {
  Tensor out = empty(g.shape(), g.options());
  binary_grad_stub(g.device())(op, out, g, cast_expand(a, g.shape(), g.dtype()), cast_expand(b, g.shape(), g.dtype()));
  return out;
}

Tensor run_where(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape, DType dt) {
  Tensor out = empty(shape, {dt, a.device()});
  where_stub(a.device())(out, cast_expand(cond, shape, DType::Bool), cast_expand(a, shape, dt),
                         cast_expand(b, shape, dt));
  return out;
}

// where(cond, g, 0) or where(cond, 0, g): the gradient that flows through one side of a select.
Tensor masked_grad(const Tensor& cond, const Tensor& g, bool keep_where_true) {
  Tensor zero = full({}, 0.0, g.options());
  return keep_where_true ? run_where(cond, g, zero, g.shape(), g.dtype())
                         : run_where(cond, zero, g, g.shape(), g.dtype());
}

// ------------------------------------------------------------ differentiable binary ops

Tensor add_impl(const Tensor& a, const Tensor& b, double alpha, const char* name, const char* backward_name) {
  check_same_device(a, b, name);
  const DType dt = promote_types(a.dtype(), b.dtype());
  EMBER_CHECK(is_floating(dt) || is_integral_value(alpha), name, ": alpha ", alpha,
              " must be an integer for integer operands");
  Tensor out = run_binary(BinaryOp::Add, a, b, alpha, dt, name);
  if (autograd::any_requires_grad({a, b})) {
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record(backward_name, {a, b}, {out}, [ma, mb, alpha](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      if (n[0]) r[0] = reduce_grad(g[0], ma.shape, ma.dtype);
      if (n[1]) r[1] = reduce_grad(alpha == 1.0 ? g[0] : mul(g[0], alpha), mb.shape, mb.dtype);
      return r;
    });
  }
  return out;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  return add_impl(a, b, alpha, "add", "AddBackward");
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  return add_impl(a, b, -alpha, "sub", "SubBackward");
}

Tensor mul(const Tensor& a, const Tensor& b) {
  check_same_device(a, b, "mul");
  Tensor out = run_binary(BinaryOp::Mul, a, b, 1.0, promote_types(a.dtype(), b.dtype()), "mul");
  if (autograd::any_requires_grad({a, b})) {
    // Each operand is needed only for the other's gradient.
    SavedTensor sa = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor sb = a.requires_grad() ? SavedTensor(b) : SavedTensor();
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record("MulBackward", {a, b}, {out}, [sa, sb, ma, mb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      if (n[0]) r[0] = reduce_grad(mul(g[0], sb.get()), ma.shape, ma.dtype);
      if (n[1]) r[1] = reduce_grad(mul(g[0], sa.get()), mb.shape, mb.dtype);
      return r;
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  check_same_device(a, b, "div");
  DType dt = promote_types(a.dtype(), b.dtype());
  if (is_integral(dt)) dt = DType::Float32;  // true division, as PyTorch
  Tensor out = run_binary(BinaryOp::Div, a, b, 1.0, dt, "div");
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa = b.requires_grad() ? SavedTensor(a) : SavedTensor();
    SavedTensor sb(b);
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record("DivBackward", {a, b}, {out}, [sa, sb, ma, mb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      Tensor bv = sb.get();
      if (n[0]) r[0] = reduce_grad(div(g[0], bv), ma.shape, ma.dtype);
      if (n[1]) r[1] = reduce_grad(run_binary_grad(BinaryGradOp::DivDivisor, g[0], sa.get(), bv), mb.shape, mb.dtype);
      return r;
    });
  }
  return out;
}

Tensor add(const Tensor& a, double b) {
  return add(a, scalar_like(b, a));
}
Tensor sub(const Tensor& a, double b) {
  return sub(a, scalar_like(b, a));
}
Tensor mul(const Tensor& a, double b) {
  return mul(a, scalar_like(b, a));
}
Tensor div(const Tensor& a, double b) {
  return div(a, scalar_like(b, a));
}
Tensor rsub(const Tensor& a, double b) {
  return sub(scalar_like(b, a), a);
}

namespace {

Tensor max_min(const Tensor& a, const Tensor& b, bool is_max) {
  const char* name = is_max ? "maximum" : "minimum";
  check_same_device(a, b, name);
  Tensor out =
      run_binary(is_max ? BinaryOp::Maximum : BinaryOp::Minimum, a, b, 1.0, promote_types(a.dtype(), b.dtype()), name);
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record(is_max ? "MaximumBackward" : "MinimumBackward", {a, b}, {out},
                     [sa, sb, ma, mb, is_max](const Grads& g, const Needs& n) -> Grads {
                       Grads r(2);
                       Tensor av = sa.get(), bv = sb.get();
                       if (n[0]) {
                         auto op = is_max ? BinaryGradOp::MaximumA : BinaryGradOp::MinimumA;
                         r[0] = reduce_grad(run_binary_grad(op, g[0], av, bv), ma.shape, ma.dtype);
                       }
                       if (n[1]) {
                         auto op = is_max ? BinaryGradOp::MaximumB : BinaryGradOp::MinimumB;
                         r[1] = reduce_grad(run_binary_grad(op, g[0], av, bv), mb.shape, mb.dtype);
                       }
                       return r;
                     });
  }
  return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  return max_min(a, b, true);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return max_min(a, b, false);
}

Tensor pow(const Tensor& a, const Tensor& b) {
  if (auto c = autocast_args(AutocastOp::pow, a, b)) return pow((*c)[0], (*c)[1]);
  check_same_device(a, b, "pow");
  Tensor out = run_binary(BinaryOp::Pow, a, b, 1.0, promote_types(a.dtype(), b.dtype()), "pow");
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record("PowBackward", {a, b}, {out}, [sa, sb, ma, mb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      Tensor av = sa.get(), bv = sb.get();
      if (n[0]) r[0] = reduce_grad(run_binary_grad(BinaryGradOp::PowBase, g[0], av, bv), ma.shape, ma.dtype);
      if (n[1]) r[1] = reduce_grad(run_binary_grad(BinaryGradOp::PowExponent, g[0], av, bv), mb.shape, mb.dtype);
      return r;
    });
  }
  return out;
}

Tensor pow(const Tensor& a, double exponent) {
  if (auto c = autocast_args(AutocastOp::pow, a)) return pow((*c)[0], exponent);
  check_defined(a, "pow");
  DType dt = a.dtype();
  if (is_integral(dt)) {
    if (is_integral_value(exponent)) {
      EMBER_CHECK(exponent >= 0, "pow: integers to negative integer powers are not allowed (exponent ", exponent, ")");
      if (dt == DType::Bool) dt = DType::Int64;
    } else {
      dt = DType::Float32;
    }
  }
  check_math_dtype(dt, "pow");
  Tensor out = run_unary(UnaryOp::Pow, a, dt, exponent);
  if (autograd::any_requires_grad({a})) {
    SavedTensor sa(a);
    autograd::record("PowBackward", {a}, {out}, [sa, exponent](const Grads& g, const Needs&) -> Grads {
      return {run_unary_grad(UnaryGradOp::Pow, g[0], sa.get(), exponent)};
    });
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device(a, b, "where");
  check_same_device(cond, a, "where");
  EMBER_CHECK(cond.dtype() == DType::Bool, "where: the condition must be a bool tensor, got ",
              dtype_name(cond.dtype()));
  const Shape shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  const DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = run_where(cond, a, b, shape, dt);
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sc(cond);
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record("WhereBackward", {a, b}, {out}, [sc, ma, mb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      Tensor c = sc.get();
      if (n[0]) r[0] = reduce_grad(masked_grad(c, g[0], true), ma.shape, ma.dtype);
      if (n[1]) r[1] = reduce_grad(masked_grad(c, g[0], false), mb.shape, mb.dtype);
      return r;
    });
  }
  return out;
}

// ------------------------------------------------------------ unary math

namespace {

// A differentiable unary op whose backward is a UnaryGradOp of the saved input (or output).
Tensor unary_op(const Tensor& a, UnaryOp op, DType dt, const char* backward_name, UnaryGradOp gop, bool save_output,
                double p0 = 0, double p1 = 0) {
  Tensor out = run_unary(op, a, dt, p0, p1);
  if (autograd::any_requires_grad({a})) {
    SavedTensor s(save_output ? out : a);
    autograd::record(backward_name, {a}, {out}, [s, gop, p0, p1](const Grads& g, const Needs&) -> Grads {
      return {run_unary_grad(gop, g[0], s.get(), p0, p1)};
    });
  }
  return out;
}

DType numeric_dtype(const Tensor& a, const char* op) {
  check_defined(a, op);
  check_math_dtype(a.dtype(), op);
  return a.dtype();
}

DType checked_float_dtype(const Tensor& a, const char* op) {
  check_defined(a, op);
  return float_dtype(a, op);
}

}  // namespace

Tensor neg(const Tensor& a) {
  Tensor out = run_unary(UnaryOp::Neg, a, numeric_dtype(a, "neg"));
  autograd::record("NegBackward", {a}, {out}, [](const Grads& g, const Needs&) -> Grads { return {neg(g[0])}; });
  return out;
}

Tensor abs(const Tensor& a) {
  return unary_op(a, UnaryOp::Abs, numeric_dtype(a, "abs"), "AbsBackward", UnaryGradOp::Abs, false);
}

Tensor sign(const Tensor& a) {
  Tensor out = run_unary(UnaryOp::Sign, a, numeric_dtype(a, "sign"));
  autograd::record("SignBackward", {a}, {out},
                   [](const Grads& g, const Needs&) -> Grads { return {zeros_like(g[0])}; });
  return out;
}

Tensor exp(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::exp, a)) return exp((*c)[0]);
  return unary_op(a, UnaryOp::Exp, checked_float_dtype(a, "exp"), "ExpBackward", UnaryGradOp::Exp, true);
}

Tensor log(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::log, a)) return log((*c)[0]);
  return unary_op(a, UnaryOp::Log, checked_float_dtype(a, "log"), "LogBackward", UnaryGradOp::Log, false);
}

Tensor log1p(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::log1p, a)) return log1p((*c)[0]);
  return unary_op(a, UnaryOp::Log1p, checked_float_dtype(a, "log1p"), "Log1pBackward", UnaryGradOp::Log1p, false);
}

Tensor sqrt(const Tensor& a) {
  return unary_op(a, UnaryOp::Sqrt, checked_float_dtype(a, "sqrt"), "SqrtBackward", UnaryGradOp::Sqrt, true);
}

Tensor rsqrt(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::rsqrt, a)) return rsqrt((*c)[0]);
  return unary_op(a, UnaryOp::Rsqrt, checked_float_dtype(a, "rsqrt"), "RsqrtBackward", UnaryGradOp::Rsqrt, true);
}

Tensor square(const Tensor& a) {
  return unary_op(a, UnaryOp::Square, numeric_dtype(a, "square"), "SquareBackward", UnaryGradOp::Square, false);
}

namespace {

struct ClampArgs {
  DType dtype;
  double lo, hi;
};

ClampArgs clamp_args(const Tensor& a, std::optional<double> min, std::optional<double> max, const char* op) {
  check_defined(a, op);
  EMBER_CHECK(min.has_value() || max.has_value(), op, ": at least one of min and max must be given");
  DType dt = a.dtype();
  check_math_dtype(dt, op);
  if (is_integral(dt) && ((min && !is_integral_value(*min)) || (max && !is_integral_value(*max)))) dt = DType::Float32;
  return {dt, min.value_or(-INFINITY), max.value_or(INFINITY)};
}

}  // namespace

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  const ClampArgs c = clamp_args(a, min, max, "clamp");
  return unary_op(a, UnaryOp::Clamp, c.dtype, "ClampBackward", UnaryGradOp::Clamp, false, c.lo, c.hi);
}

// ------------------------------------------------------------ activations

namespace {

Tensor activation(const Tensor& a, ActivationOp op, DType dt, const char* backward_name, double p0 = 0, double p1 = 0) {
  Tensor out = empty(a.shape(), {dt, a.device()});
  activation_stub(a.device())(op, out, cast_expand(a, a.shape(), dt), p0, p1);
  if (autograd::any_requires_grad({a})) {
    SavedTensor s(activation_grad_uses_output(op) ? out : a);
    autograd::record(backward_name, {a}, {out}, [s, op, p0, p1](const Grads& g, const Needs&) -> Grads {
      return {run_activation_grad(op, g[0], s.get(), p0, p1)};
    });
  }
  return out;
}

}  // namespace

Tensor relu(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::relu, a)) return relu((*c)[0]);
  return activation(a, ActivationOp::Relu, numeric_dtype(a, "relu"), "ReluBackward");
}

Tensor leaky_relu(const Tensor& a, double negative_slope) {
  if (auto c = autocast_args(AutocastOp::leaky_relu, a)) return leaky_relu((*c)[0], negative_slope);
  return activation(a, ActivationOp::LeakyRelu, checked_float_dtype(a, "leaky_relu"), "LeakyReluBackward",
                    negative_slope);
}

Tensor elu(const Tensor& a, double alpha) {
  return activation(a, ActivationOp::Elu, checked_float_dtype(a, "elu"), "EluBackward", alpha);
}

Tensor gelu(const Tensor& a, bool tanh_approximation) {
  if (auto c = autocast_args(AutocastOp::gelu, a)) return gelu((*c)[0], tanh_approximation);
  return activation(a, tanh_approximation ? ActivationOp::GeluTanh : ActivationOp::Gelu, checked_float_dtype(a, "gelu"),
                    "GeluBackward");
}

Tensor sigmoid(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::sigmoid, a)) return sigmoid((*c)[0]);
  return activation(a, ActivationOp::Sigmoid, checked_float_dtype(a, "sigmoid"), "SigmoidBackward");
}

Tensor tanh(const Tensor& a) {
  if (auto c = autocast_args(AutocastOp::tanh, a)) return tanh((*c)[0]);
  return activation(a, ActivationOp::Tanh, checked_float_dtype(a, "tanh"), "TanhBackward");
}

Tensor hardtanh(const Tensor& a, double min_val, double max_val) {
  EMBER_CHECK(min_val < max_val, "hardtanh: min_val (", min_val, ") must be less than max_val (", max_val, ")");
  return activation(a, ActivationOp::Hardtanh, checked_float_dtype(a, "hardtanh"), "HardtanhBackward", min_val,
                    max_val);
}

Tensor softplus(const Tensor& a, double beta, double threshold) {
  if (auto c = autocast_args(AutocastOp::softplus, a)) return softplus((*c)[0], beta, threshold);
  EMBER_CHECK(beta != 0.0, "softplus: beta must be non-zero");
  return activation(a, ActivationOp::Softplus, checked_float_dtype(a, "softplus"), "SoftplusBackward", beta, threshold);
}

// ------------------------------------------------------------ comparisons and logic

namespace {

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, {DType::Bool, a.device()});
  compare_stub(a.device())(op, out, cast_expand(a, shape, dt), cast_expand(b, shape, dt));
  return out;
}

Tensor logical(LogicalOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = empty(shape, {DType::Bool, a.device()});
  logical_stub(a.device())(op, out, cast_expand(a, shape, DType::Bool), cast_expand(b, shape, DType::Bool));
  return out;
}

// Whether every element of a bool tensor is true.
bool all_true(const Tensor& t) {
  if (t.numel() == 0) return true;
  NoGradGuard ng;
  return sum(t).item() == static_cast<double>(t.numel());
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::Eq, a, b, "eq");
}
Tensor ne(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::Ne, a, b, "ne");
}
Tensor lt(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::Lt, a, b, "lt");
}
Tensor le(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::Le, a, b, "le");
}
Tensor gt(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::Gt, a, b, "gt");
}
Tensor ge(const Tensor& a, const Tensor& b) {
  return compare(CompareOp::Ge, a, b, "ge");
}
// Tensor-scalar comparisons: the scalar becomes a 0-dim tensor of a's dtype.
static Tensor compare_scalar(CompareOp op, const Tensor& a, double b, const char* name) {
  check_defined(a, name);
  return compare(op, a, scalar_like(b, a), name);
}
Tensor eq(const Tensor& a, double b) {
  return compare_scalar(CompareOp::Eq, a, b, "eq");
}
Tensor ne(const Tensor& a, double b) {
  return compare_scalar(CompareOp::Ne, a, b, "ne");
}
Tensor lt(const Tensor& a, double b) {
  return compare_scalar(CompareOp::Lt, a, b, "lt");
}
Tensor le(const Tensor& a, double b) {
  return compare_scalar(CompareOp::Le, a, b, "le");
}
Tensor gt(const Tensor& a, double b) {
  return compare_scalar(CompareOp::Gt, a, b, "gt");
}
Tensor ge(const Tensor& a, double b) {
  return compare_scalar(CompareOp::Ge, a, b, "ge");
}

Tensor logical_not(const Tensor& a) {
  check_defined(a, "logical_not");
  Tensor out = empty(a.shape(), {DType::Bool, a.device()});
  Tensor in = cast_expand(a, a.shape(), DType::Bool);
  logical_stub(a.device())(LogicalOp::Not, out, in, in);
  return out;
}
Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logical(LogicalOp::And, a, b, "logical_and");
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logical(LogicalOp::Or, a, b, "logical_or");
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  check_same_device(a, b, "allclose");
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "allclose");
  DType dt = promote_types(a.dtype(), b.dtype());
  if (dt != DType::Float32) dt = DType::Float64;  // integers and the storage types compare as doubles
  Tensor close = empty(shape, {DType::Bool, a.device()});
  isclose_stub(a.device())(close, cast_expand(a, shape, dt), cast_expand(b, shape, dt), rtol, atol);
  return all_true(close);
}

bool equal(const Tensor& a, const Tensor& b) {
  check_same_device(a, b, "equal");
  if (a.shape() != b.shape()) return false;
  return all_true(eq(a, b));
}

// ------------------------------------------------------------ in place

namespace {

// An in-place result cannot go into a tensor whose elements share memory (an expanded view):
// the elements would overwrite each other in an unspecified order.
void check_writable(const Tensor& a, const char* name) {
  for (int64_t d = 0; d < a.dim(); ++d)
    EMBER_CHECK(a.strides()[d] != 0 || a.shape()[d] <= 1, name, ": the in-place tensor of shape ", shape_str(a.shape()),
                " has elements that share memory (an expanded view); clone() it first");
}

// Checks that op's result (broadcast shape, promoted dtype `dt`) can be written into `a`.
void check_inplace_result(const Tensor& a, const Shape& shape, DType dt, const char* name) {
  EMBER_CHECK(shape == a.shape(), name, ": the result shape ", shape_str(shape),
              " does not match the in-place tensor's ", shape_str(a.shape()));
  check_writable(a, name);
  EMBER_CHECK(!(is_floating(dt) && !is_floating(a.dtype())) && !(dt != DType::Bool && a.dtype() == DType::Bool), name,
              ": the result dtype ", dtype_name(dt), " cannot be written into a tensor of dtype ",
              dtype_name(a.dtype()));
}

// b as the kernel may read it while writing a: a copy when it shares a's memory in any way other
// than element for element (an overlapping view would be read after being overwritten).
Tensor unaliased(const Tensor& a, const Tensor& b) {
  if (b.storage() != a.storage()) return b;
  if (b.offset() == a.offset() && b.strides() == a.strides() && b.shape() == a.shape()) return b;
  NoGradGuard ng;
  return b.clone();
}

Tensor& binary_inplace(BinaryOp op, Tensor& a, const Tensor& b, double alpha, const char* name) {
  check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  DType dt = promote_types(a.dtype(), b.dtype());
  if (op == BinaryOp::Div && is_integral(dt)) dt = DType::Float32;
  check_inplace_result(a, shape, dt, name);
  check_math_dtype(a.dtype(), name);
  EMBER_CHECK(is_floating(dt) || is_integral_value(alpha), name, ": alpha ", alpha,
              " must be an integer for integer operands");
  const bool track = autograd::any_requires_grad({a, b});
  if (track) autograd::check_inplace(a, name);
  // What the backward needs, saved before a is overwritten.
  SavedTensor sa_old, sb;
  if (track && op == BinaryOp::Mul) {
    if (a.requires_grad()) sb = SavedTensor(b);
    if (b.requires_grad()) {
      NoGradGuard ng;
      sa_old = SavedTensor(a.clone());
    }
  }
  if (track && op == BinaryOp::Div) sb = SavedTensor(b);
  binary_stub(a.device())(op, a, a, cast_expand(unaliased(a, b), shape, a.dtype()), alpha);
  a.bump_version();
  if (track) {
    SavedTensor sout;
    if (op == BinaryOp::Div && b.requires_grad()) sout = SavedTensor(a);
    InputMeta ma = meta_of(a), mb = meta_of(b);
    autograd::record_inplace(name, a, {b},
                             [op, alpha, sa_old, sb, sout, ma, mb](const Grads& g, const Needs& n) -> Grads {
                               Grads r(2);
                               switch (op) {
                                 case BinaryOp::Add:
                                 case BinaryOp::Sub: {
                                   const double s = op == BinaryOp::Add ? alpha : -alpha;
                                   if (n[0]) r[0] = g[0];
                                   if (n[1]) r[1] = reduce_grad(s == 1.0 ? g[0] : mul(g[0], s), mb.shape, mb.dtype);
                                   break;
                                 }
                                 case BinaryOp::Mul:
                                   if (n[0]) r[0] = reduce_grad(mul(g[0], sb.get()), ma.shape, ma.dtype);
                                   if (n[1]) r[1] = reduce_grad(mul(g[0], sa_old.get()), mb.shape, mb.dtype);
                                   break;
                                 case BinaryOp::Div:
                                   // d(a/b)/db = -a/b^2 = -out/b.
                                   if (n[0]) r[0] = reduce_grad(div(g[0], sb.get()), ma.shape, ma.dtype);
                                   if (n[1])
                                     r[1] = reduce_grad(neg(div(mul(g[0], sout.get()), sb.get())), mb.shape, mb.dtype);
                                   break;
                                 default:
                                   break;
                               }
                               return r;
                             });
  }
  return a;
}

}  // namespace

Tensor& add_(Tensor& a, const Tensor& b, double alpha) {
  return binary_inplace(BinaryOp::Add, a, b, alpha, "add_");
}
Tensor& sub_(Tensor& a, const Tensor& b, double alpha) {
  return binary_inplace(BinaryOp::Sub, a, b, alpha, "sub_");
}
Tensor& mul_(Tensor& a, const Tensor& b) {
  return binary_inplace(BinaryOp::Mul, a, b, 1.0, "mul_");
}
Tensor& div_(Tensor& a, const Tensor& b) {
  return binary_inplace(BinaryOp::Div, a, b, 1.0, "div_");
}
Tensor& add_(Tensor& a, double b) {
  check_defined(a, "add_");
  return binary_inplace(BinaryOp::Add, a, scalar_like(b, a), 1.0, "add_");
}
Tensor& mul_(Tensor& a, double b) {
  check_defined(a, "mul_");
  return binary_inplace(BinaryOp::Mul, a, scalar_like(b, a), 1.0, "mul_");
}

Tensor& clamp_(Tensor& a, std::optional<double> min, std::optional<double> max) {
  const ClampArgs c = clamp_args(a, min, max, "clamp_");
  check_writable(a, "clamp_");
  EMBER_CHECK(c.dtype == a.dtype(), "clamp_: bounds that are not integers cannot clamp a tensor of dtype ",
              dtype_name(a.dtype()), " in place");
  const bool track = autograd::any_requires_grad({a});
  if (track) autograd::check_inplace(a, "clamp_");
  // The gradient mask comes from the input, which the clamp overwrites: compute it first.
  SavedTensor mask;
  if (track) {
    NoGradGuard ng;
    mask = SavedTensor(logical_and(ge(a, c.lo), le(a, c.hi)));
  }
  unary_stub(a.device())(UnaryOp::Clamp, a, a, c.lo, c.hi);
  a.bump_version();
  if (track) {
    autograd::record_inplace("ClampBackward", a, {}, [mask](const Grads& g, const Needs&) -> Grads {
      return {masked_grad(mask.get(), g[0], true)};
    });
  }
  return a;
}

Tensor& relu_(Tensor& a) {
  numeric_dtype(a, "relu_");
  check_writable(a, "relu_");
  const bool track = autograd::any_requires_grad({a});
  if (track) autograd::check_inplace(a, "relu_");
  activation_stub(a.device())(ActivationOp::Relu, a, a, 0, 0);
  a.bump_version();
  if (track) {
    SavedTensor out(a);  // relu's backward needs only the output
    autograd::record_inplace("ReluBackward", a, {}, [out](const Grads& g, const Needs&) -> Grads {
      return {run_activation_grad(ActivationOp::Relu, g[0], out.get(), 0, 0)};
    });
  }
  return a;
}

Tensor& neg_(Tensor& a) {
  numeric_dtype(a, "neg_");
  check_writable(a, "neg_");
  const bool track = autograd::any_requires_grad({a});
  if (track) autograd::check_inplace(a, "neg_");
  unary_stub(a.device())(UnaryOp::Neg, a, a, 0, 0);
  a.bump_version();
  if (track) {
    autograd::record_inplace("NegBackward", a, {}, [](const Grads& g, const Needs&) -> Grads { return {neg(g[0])}; });
  }
  return a;
}

Tensor& masked_fill_(Tensor& a, const Tensor& mask, double value) {
  check_same_device(a, mask, "masked_fill_");
  EMBER_CHECK(mask.dtype() == DType::Bool, "masked_fill_: the mask must be a bool tensor, got ",
              dtype_name(mask.dtype()));
  const Shape shape = broadcast_shapes(a.shape(), mask.shape(), "masked_fill_");
  EMBER_CHECK(shape == a.shape(), "masked_fill_: the mask of shape ", shape_str(mask.shape()),
              " does not broadcast to the tensor's shape ", shape_str(a.shape()));
  check_writable(a, "masked_fill_");
  const bool track = autograd::any_requires_grad({a});
  if (track) autograd::check_inplace(a, "masked_fill_");
  Tensor m = cast_expand(unaliased(a, mask), shape, DType::Bool);
  where_stub(a.device())(a, m, full({}, value, a.options()).expand(shape), a);
  a.bump_version();
  if (track) {
    SavedTensor sm(mask);
    autograd::record_inplace("MaskedFillBackward", a, {}, [sm](const Grads& g, const Needs&) -> Grads {
      return {masked_grad(sm.get(), g[0], false)};
    });
  }
  return a;
}

// ------------------------------------------------------------ operators

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, double b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, double b) {
  return div(a, b);
}
Tensor operator+(double a, const Tensor& b) {
  return add(b, a);
}
Tensor operator-(double a, const Tensor& b) {
  return rsub(b, a);
}
Tensor operator*(double a, const Tensor& b) {
  return mul(b, a);
}
Tensor operator/(double a, const Tensor& b) {
  check_defined(b, "div");
  return div(scalar_like(a, b), b);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}

}  // namespace ember
