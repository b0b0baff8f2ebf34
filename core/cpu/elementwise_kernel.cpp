// CPU kernels for the two-operand elementwise families: arithmetic, comparisons, logical ops,
// where, isclose, and the fused gradients of the binary ops.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cpu/elementwise_loops.h"
#include "core/cpu/vec_math.h"
#include "core/elementwise_kernels.h"
#include "core/int_pow.h"

namespace ember {

namespace {

template <typename T>
T max_of(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    return cpu::blend(x > y || x != x, x, y);  // NaN in either propagates
  else
    return x > y ? x : y;
}

template <typename T>
T min_of(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    return cpu::blend(x < y || x != x, x, y);
  else
    return x < y ? x : y;
}

template <typename T>
void binary_impl(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  const T al = binary_alpha<T>(alpha);
  switch (op) {
    case BinaryOp::Add:
      if (alpha == 1.0)
        cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return static_cast<T>(x + y); });
      else
        cpu::map2<T, T, T>(out, a, b, [al](T x, T y) EMBER_VEC_LAMBDA { return static_cast<T>(x + al * y); });
      break;
    case BinaryOp::Sub:
      if (alpha == 1.0)
        cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return static_cast<T>(x - y); });
      else
        cpu::map2<T, T, T>(out, a, b, [al](T x, T y) EMBER_VEC_LAMBDA { return static_cast<T>(x - al * y); });
      break;
    case BinaryOp::Mul:
      cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return static_cast<T>(x * y); });
      break;
    case BinaryOp::Div:
      if constexpr (std::is_integral_v<T>) {
        EMBER_FAIL("div: integer operands must be converted to a floating dtype first");
      } else {
        cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return x / y; });
      }
      break;
    case BinaryOp::Maximum:
      cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return max_of(x, y); });
      break;
    case BinaryOp::Minimum:
      cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return min_of(x, y); });
      break;
    case BinaryOp::Pow:
      if constexpr (std::is_integral_v<T>)
        cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return int_pow(x, y); });
      else
        cpu::map2<T, T, T>(out, a, b, [](T x, T y) EMBER_VEC_LAMBDA { return static_cast<T>(std::pow(x, y)); });
      break;
  }
}

void cpu_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  EMBER_DISPATCH_NUMERIC(a.dtype(), "binary op", [&] { binary_impl<scalar_t>(op, out, a, b, alpha); });
}

void cpu_binary_grad(BinaryGradOp op, const Tensor& out, const Tensor& grad, const Tensor& a, const Tensor& b) {
  EMBER_DISPATCH_FLOAT(grad.dtype(), "binary op backward", [&] {
    using T = scalar_t;
    auto run = [&](auto f) { cpu::map3_fast<T, T, T, T>(out, grad, a, b, f); };
    switch (op) {
      case BinaryGradOp::MaximumA:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA { return cpu::blend(x == y, T(0.5) * g, cpu::blend(x < y, T(0), g)); });
        break;
      case BinaryGradOp::MaximumB:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA { return cpu::blend(x == y, T(0.5) * g, cpu::blend(x > y, T(0), g)); });
        break;
      case BinaryGradOp::MinimumA:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA { return cpu::blend(x == y, T(0.5) * g, cpu::blend(x > y, T(0), g)); });
        break;
      case BinaryGradOp::MinimumB:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA { return cpu::blend(x == y, T(0.5) * g, cpu::blend(x < y, T(0), g)); });
        break;
      case BinaryGradOp::PowBase:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA { return cpu::blend(y == T(0), T(0), g * y * std::pow(x, y - T(1))); });
        break;
      case BinaryGradOp::PowExponent:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA {
          return cpu::blend(x == T(0) && y >= T(0), T(0), g * std::pow(x, y) * std::log(x));
        });
        break;
      case BinaryGradOp::DivDivisor:
        run([](T g, T x, T y) EMBER_VEC_LAMBDA { return -g * (x / y) / y; });
        break;
    }
  });
}

template <typename T>
void compare_impl(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  auto run = [&](auto f) { cpu::map2<bool, T, T>(out, a, b, f); };
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    // Storage types: compare their float values.
    auto fl = [](T v) EMBER_VEC_LAMBDA { return static_cast<float>(v); };
    switch (op) {
      case CompareOp::Eq:
        run([fl](T x, T y) EMBER_VEC_LAMBDA { return fl(x) == fl(y); });
        break;
      case CompareOp::Ne:
        run([fl](T x, T y) EMBER_VEC_LAMBDA { return fl(x) != fl(y); });
        break;
      case CompareOp::Lt:
        run([fl](T x, T y) EMBER_VEC_LAMBDA { return fl(x) < fl(y); });
        break;
      case CompareOp::Le:
        run([fl](T x, T y) EMBER_VEC_LAMBDA { return fl(x) <= fl(y); });
        break;
      case CompareOp::Gt:
        run([fl](T x, T y) EMBER_VEC_LAMBDA { return fl(x) > fl(y); });
        break;
      case CompareOp::Ge:
        run([fl](T x, T y) EMBER_VEC_LAMBDA { return fl(x) >= fl(y); });
        break;
    }
  } else {
    switch (op) {
      case CompareOp::Eq:
        run([](T x, T y) EMBER_VEC_LAMBDA { return x == y; });
        break;
      case CompareOp::Ne:
        run([](T x, T y) EMBER_VEC_LAMBDA { return x != y; });
        break;
      case CompareOp::Lt:
        run([](T x, T y) EMBER_VEC_LAMBDA { return x < y; });
        break;
      case CompareOp::Le:
        run([](T x, T y) EMBER_VEC_LAMBDA { return x <= y; });
        break;
      case CompareOp::Gt:
        run([](T x, T y) EMBER_VEC_LAMBDA { return x > y; });
        break;
      case CompareOp::Ge:
        run([](T x, T y) EMBER_VEC_LAMBDA { return x >= y; });
        break;
    }
  }
}

void cpu_compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  EMBER_DISPATCH_ALL(a.dtype(), "comparison", [&] { compare_impl<scalar_t>(op, out, a, b); });
}

void cpu_logical(LogicalOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  switch (op) {
    case LogicalOp::And:
      cpu::map2<bool, bool, bool>(out, a, b, [](bool x, bool y) { return x && y; });
      break;
    case LogicalOp::Or:
      cpu::map2<bool, bool, bool>(out, a, b, [](bool x, bool y) { return x || y; });
      break;
    case LogicalOp::Not:
      cpu::map1<bool, bool>(out, a, [](bool x) { return !x; });
      break;
  }
}

// True when every element of t is the same memory location (a broadcast scalar).
bool is_broadcast_scalar(const Tensor& t) {
  for (int64_t s : t.strides())
    if (s != 0) return false;
  return true;
}

template <typename T>
void where_impl(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  // Pick with a bit blend for floats (see cpu::blend), a plain select otherwise.
  auto pick = [](bool c, T x, T y) -> T {
    if constexpr (std::is_floating_point_v<T>)
      return cpu::blend(c, x, y);
    else
      return c ? x : y;
  };
  // A scalar side (masked_fill_, the zeros of where's backward) goes through map2, whose
  // contiguous paths vectorise.
  if (is_broadcast_scalar(a)) {
    const T v = *static_cast<const T*>(a.raw_data());
    cpu::map2<T, bool, T>(out, cond, b, [v, pick](bool c, T y) { return pick(c, v, y); });
  } else if (is_broadcast_scalar(b)) {
    const T v = *static_cast<const T*>(b.raw_data());
    cpu::map2<T, bool, T>(out, cond, a, [v, pick](bool c, T x) { return pick(c, x, v); });
  } else {
    cpu::map3_fast<T, bool, T, T>(out, cond, a, b, pick);
  }
}

void cpu_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (out.numel() == 0) return;
  EMBER_DISPATCH_ALL(out.dtype(), "where", [&] { where_impl<scalar_t>(out, cond, a, b); });
}

void cpu_isclose(const Tensor& out, const Tensor& a, const Tensor& b, double rtol, double atol) {
  EMBER_DISPATCH_FLOAT(a.dtype(), "isclose", [&] {
    using T = scalar_t;
    const T rt = static_cast<T>(rtol), at = static_cast<T>(atol);
    cpu::map2<bool, T, T>(out, a, b, [rt, at](T x, T y) EMBER_VEC_LAMBDA {
      // An infinite difference is never close (inf vs -inf), as PyTorch.
      const T d = std::fabs(x - y);
      return x == y || (d <= at + rt * std::fabs(y) && d < std::numeric_limits<T>::infinity());
    });
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(binary_stub, CPU, cpu_binary);
EMBER_REGISTER_KERNEL(binary_grad_stub, CPU, cpu_binary_grad);
EMBER_REGISTER_KERNEL(compare_stub, CPU, cpu_compare);
EMBER_REGISTER_KERNEL(logical_stub, CPU, cpu_logical);
EMBER_REGISTER_KERNEL(where_stub, CPU, cpu_where);
EMBER_REGISTER_KERNEL(isclose_stub, CPU, cpu_isclose);

}  // namespace ember
