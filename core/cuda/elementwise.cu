// CUDA kernels for the elementwise families of core/elementwise_kernels.h: binary arithmetic,
// unary math, activations and the fused gradients of all three, with broadcasting (operands
// arrive expanded to the output's shape). One functor per family carries the op and its
// parameters, so each family is one kernel per dtype and layout (core/cuda/elementwise_loops.h:
// 16-byte vector loads when contiguous, an offset calculator otherwise). The math follows the CPU
// kernels case by case (NaN propagation, integer wrap-around, the special-cased exponents), so
// the two agree within floating-point tolerance.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/launch.h"
#include "core/elementwise_kernels.h"
#include "core/int_pow.h"

namespace ember::cuda {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;

template <typename T>
EMBER_DEVICE T sigmoid(T x) {
  const T e = d_exp(-d_fabs(x));
  const T p = T(1) / (T(1) + e);
  return x >= T(0) ? p : e * p;
}
template <typename T>
EMBER_DEVICE T normal_cdf(T x) {
  return T(0.5) * d_erfc(-x * T(0.70710678118654752440));
}
template <typename T>
EMBER_DEVICE T normal_pdf(T x) {
  return T(0.39894228040143267794) * d_exp(T(-0.5) * x * x);
}
template <typename T>
EMBER_DEVICE T gelu_tanh_sigmoid(T x) {
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return sigmoid(T(2) * u);
}

// ------------------------------------------------------------------ binary
template <typename T>
struct BinaryF {
  BinaryOp op;
  T alpha;
  bool unit_alpha;
  EMBER_DEVICE T operator()(T x, T y) const {
    switch (op) {
      case BinaryOp::Add:
        return unit_alpha ? static_cast<T>(x + y) : static_cast<T>(x + alpha * y);
      case BinaryOp::Sub:
        return unit_alpha ? static_cast<T>(x - y) : static_cast<T>(x - alpha * y);
      case BinaryOp::Mul:
        return static_cast<T>(x * y);
      case BinaryOp::Div:
        if constexpr (std::is_floating_point_v<T>) return x / y;
        return T(0);  // refused on the host
      case BinaryOp::Maximum:
        if constexpr (std::is_floating_point_v<T>) return max_nan(x, y);
        return x > y ? x : y;
      case BinaryOp::Minimum:
        if constexpr (std::is_floating_point_v<T>) return min_nan(x, y);
        return x < y ? x : y;
      case BinaryOp::Pow:
        if constexpr (std::is_floating_point_v<T>) return d_pow(x, y);
        if constexpr (std::is_integral_v<T>) return int_pow(x, y);
    }
    return T(0);
  }
};

void cuda_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_NUMERIC(a.dtype(), "binary op", [&] {
    using T = scalar_t;
    if constexpr (std::is_integral_v<T>) {
      EMBER_CHECK(op != BinaryOp::Div, "div: integer operands must be converted to a floating dtype first");
    }
    map<T, T, T>(BinaryF<T>{op, binary_alpha<T>(alpha), alpha == 1.0}, out, a, b);
  });
}

// ------------------------------------------------------------------ unary
// Pow's exponent, classified once on the host: the common ones are plain arithmetic (exact where
// pow would be), as on the CPU.
enum class PowKind : int { Zero, One, Two, Three, MinusOne, MinusTwo, Half, MinusHalf, General };

PowKind classify_pow(double e) {
  if (e == 0.0) return PowKind::Zero;
  if (e == 1.0) return PowKind::One;
  if (e == 2.0) return PowKind::Two;
  if (e == 3.0) return PowKind::Three;
  if (e == -1.0) return PowKind::MinusOne;
  if (e == -2.0) return PowKind::MinusTwo;
  if (e == 0.5) return PowKind::Half;
  if (e == -0.5) return PowKind::MinusHalf;
  return PowKind::General;
}

template <typename T>
struct UnaryF {
  UnaryOp op;
  T lo, hi;    // clamp
  T exponent;  // pow (floating)
  uint64_t n;  // pow (integer)
  PowKind kind;
  EMBER_DEVICE T operator()(T x) const {
    switch (op) {
      case UnaryOp::Neg:
        return static_cast<T>(-x);
      case UnaryOp::Abs:
        if constexpr (std::is_floating_point_v<T>)
          return d_fabs(x);
        else if constexpr (std::is_signed_v<T>)
          return static_cast<T>(x < 0 ? -x : x);
        else
          return x;
      case UnaryOp::Sign:
        if constexpr (std::is_unsigned_v<T>)
          return static_cast<T>(x != 0);
        else
          return static_cast<T>((T(0) < x) - (x < T(0)));
      case UnaryOp::Square:
        return static_cast<T>(x * x);
      case UnaryOp::Clamp: {
        const T t = x < lo ? lo : x;
        return t > hi ? hi : t;
      }
      case UnaryOp::Pow:
        if constexpr (std::is_integral_v<T>) {
          return pow_by_squaring(x, n);
        } else {
          switch (kind) {
            case PowKind::Zero:
              return T(1);
            case PowKind::One:
              return x;
            case PowKind::Two:
              return x * x;
            case PowKind::Three:
              return x * x * x;
            case PowKind::MinusOne:
              return T(1) / x;
            case PowKind::MinusTwo:
              return T(1) / (x * x);
            case PowKind::Half:
              return d_sqrt(x);
            case PowKind::MinusHalf:
              return T(1) / d_sqrt(x);
            case PowKind::General:
              return d_pow(x, exponent);
          }
        }
        return T(0);
      default:
        break;
    }
    if constexpr (std::is_floating_point_v<T>) {
      switch (op) {
        case UnaryOp::Exp:
          return d_exp(x);
        case UnaryOp::Log:
          return d_log(x);
        case UnaryOp::Log1p:
          return d_log1p(x);
        case UnaryOp::Sqrt:
          return d_sqrt(x);
        case UnaryOp::Rsqrt:
          return T(1) / d_sqrt(x);
        default:
          break;
      }
    }
    return T(0);
  }
};

// A double bound as T: saturated to an integer type's range (as the CPU kernel).
template <typename T>
T bound_as(double v) {
  if constexpr (std::is_integral_v<T>) {
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
  }
  return static_cast<T>(v);
}

void cuda_unary(UnaryOp op, const Tensor& out, const Tensor& a, double p0, double p1) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_NUMERIC(a.dtype(), "unary op", [&] {
    using T = scalar_t;
    if constexpr (std::is_integral_v<T>) {
      EMBER_CHECK(op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sign || op == UnaryOp::Square ||
                      op == UnaryOp::Clamp || op == UnaryOp::Pow,
                  "unary op: integer operands must be converted to a floating dtype first");
    }
    UnaryF<T> f{op, bound_as<T>(p0), bound_as<T>(p1), static_cast<T>(p0), 0, classify_pow(p0)};
    if (op == UnaryOp::Pow && std::is_integral_v<T>) f.n = static_cast<uint64_t>(p0);
    map<T, T>(f, out, a);
  });
}

// ------------------------------------------------------------------ unary gradients
template <typename T>
struct UnaryGradF {
  UnaryGradOp op;
  T p0, p1;
  EMBER_DEVICE T operator()(T g, T s) const {  // s: the saved x or y (see UnaryGradOp)
    switch (op) {
      case UnaryGradOp::Abs:
        return g * static_cast<T>((T(0) < s) - (s < T(0)));
      case UnaryGradOp::Exp:
        return g * s;
      case UnaryGradOp::Log:
        return g / s;
      case UnaryGradOp::Log1p:
        return g / (T(1) + s);
      case UnaryGradOp::Sqrt:
        return g / (T(2) * s);
      case UnaryGradOp::Rsqrt:
        return T(-0.5) * g * s * s * s;
      case UnaryGradOp::Square:
        return T(2) * g * s;
      case UnaryGradOp::Clamp:
        return (s >= p0 && s <= p1) ? g : T(0);
      case UnaryGradOp::Pow:
        if (p0 == T(0)) return T(0);
        if (p0 == T(1)) return g;
        if (p0 == T(2)) return T(2) * g * s;
        if (p0 == T(3)) return T(3) * g * s * s;
        if (p0 == T(-1)) return -g / (s * s);
        return g * p0 * d_pow(s, p0 - T(1));
    }
    return T(0);
  }
};

void cuda_unary_grad(UnaryGradOp op, const Tensor& out, const Tensor& grad, const Tensor& saved, double p0, double p1) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(grad.dtype(), "unary op backward", [&] {
    using T = scalar_t;
    map<T, T, T>(UnaryGradF<T>{op, static_cast<T>(p0), static_cast<T>(p1)}, out, grad, saved);
  });
}

// ------------------------------------------------------------------ activations
template <typename T>
struct ActivationF {
  ActivationOp op;
  T c0, c1;
  EMBER_DEVICE T operator()(T x) const {
    switch (op) {
      case ActivationOp::Relu:
        return x < T(0) ? T(0) : x;  // NaN stays NaN
      case ActivationOp::LeakyRelu:
        return x > T(0) ? x : x * c0;
      case ActivationOp::Elu:
        return x > T(0) ? x : c0 * d_expm1(x);
      case ActivationOp::Gelu:
        return x * normal_cdf(x);
      case ActivationOp::GeluTanh:
        return x * gelu_tanh_sigmoid(x);
      case ActivationOp::Sigmoid:
        return sigmoid(x);
      case ActivationOp::Tanh:
        return d_tanh(x);
      case ActivationOp::Softplus: {
        const T t = c0 * x;
        return t > c1 ? x : d_log1p(d_exp(t)) / c0;
      }
      case ActivationOp::Hardtanh:  // NaN stays NaN
        return x < c0 ? c0 : x > c1 ? c1 : x;
    }
    return T(0);
  }
};

template <typename T>
struct IntReluF {
  EMBER_DEVICE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < T(0) ? T(0) : x;
  }
};

void cuda_activation(ActivationOp op, const Tensor& out, const Tensor& a, double p0, double p1) {
  DeviceGuard guard(out.device());
  if (op == ActivationOp::Relu && !is_floating(a.dtype())) {
    EMBER_DISPATCH_NUMERIC(a.dtype(), "relu", [&] { map<scalar_t, scalar_t>(IntReluF<scalar_t>{}, out, a); });
    return;
  }
  EMBER_DISPATCH_FLOAT(a.dtype(), "activation", [&] {
    using T = scalar_t;
    map<T, T>(ActivationF<T>{op, static_cast<T>(p0), static_cast<T>(p1)}, out, a);
  });
}

template <typename T>
struct ActivationGradF {
  ActivationOp op;
  T c0, c1;
  EMBER_DEVICE T operator()(T g, T s) const {
    switch (op) {
      case ActivationOp::Relu:  // from y
        return s > T(0) ? g : T(0);
      case ActivationOp::LeakyRelu:
        return s > T(0) ? g : g * c0;
      case ActivationOp::Elu:
        return s > T(0) ? g : g * c0 * d_exp(s);
      case ActivationOp::Gelu:
        return g * (normal_cdf(s) + s * normal_pdf(s));
      case ActivationOp::GeluTanh: {
        const T sg = gelu_tanh_sigmoid(s);
        const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * s * s);
        return g * (sg + T(2) * s * sg * (T(1) - sg) * du);
      }
      case ActivationOp::Sigmoid:  // from y
        return g * s * (T(1) - s);
      case ActivationOp::Tanh:  // from y
        return g * (T(1) - s * s);
      case ActivationOp::Softplus: {
        const T t = c0 * s;
        return t > c1 ? g : g * sigmoid(t);
      }
      case ActivationOp::Hardtanh:  // no gradient at the limits
        return s > c0 && s < c1 ? g : T(0);
    }
    return T(0);
  }
};

void cuda_activation_grad(ActivationOp op, const Tensor& out, const Tensor& grad, const Tensor& saved, double p0,
                          double p1) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(grad.dtype(), "activation backward", [&] {
    using T = scalar_t;
    map<T, T, T>(ActivationGradF<T>{op, static_cast<T>(p0), static_cast<T>(p1)}, out, grad, saved);
  });
}

// ------------------------------------------------------------------ binary gradients
template <typename T>
struct BinaryGradF {
  BinaryGradOp op;
  EMBER_DEVICE T operator()(T g, T x, T y) const {
    switch (op) {
      case BinaryGradOp::MaximumA:
        return x == y ? T(0.5) * g : (x < y ? T(0) : g);
      case BinaryGradOp::MaximumB:
        return x == y ? T(0.5) * g : (x > y ? T(0) : g);
      case BinaryGradOp::MinimumA:
        return x == y ? T(0.5) * g : (x > y ? T(0) : g);
      case BinaryGradOp::MinimumB:
        return x == y ? T(0.5) * g : (x < y ? T(0) : g);
      case BinaryGradOp::PowBase:
        return y == T(0) ? T(0) : g * y * d_pow(x, y - T(1));
      case BinaryGradOp::PowExponent:
        return (x == T(0) && y >= T(0)) ? T(0) : g * d_pow(x, y) * d_log(x);
      case BinaryGradOp::DivDivisor:
        return -g * (x / y) / y;
    }
    return T(0);
  }
};

void cuda_binary_grad(BinaryGradOp op, const Tensor& out, const Tensor& grad, const Tensor& a, const Tensor& b) {
  DeviceGuard guard(out.device());
  EMBER_DISPATCH_FLOAT(grad.dtype(), "binary op backward", [&] {
    map<scalar_t, scalar_t, scalar_t, scalar_t>(BinaryGradF<scalar_t>{op}, out, grad, a, b);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(binary_stub, CUDA, cuda_binary);
EMBER_REGISTER_KERNEL(unary_stub, CUDA, cuda_unary);
EMBER_REGISTER_KERNEL(unary_grad_stub, CUDA, cuda_unary_grad);
EMBER_REGISTER_KERNEL(activation_stub, CUDA, cuda_activation);
EMBER_REGISTER_KERNEL(activation_grad_stub, CUDA, cuda_activation_grad);
EMBER_REGISTER_KERNEL(binary_grad_stub, CUDA, cuda_binary_grad);

}  // namespace ember::cuda
