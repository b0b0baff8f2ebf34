// CPU kernels for the activations (relu, leaky_relu, elu, gelu, sigmoid, tanh, softplus) and
// their fused gradients. These dominate elementwise time in training, so the float32 versions
// use the vectorisable functions of core/cpu/vec_math.h; float64 uses std::.
#include <cmath>
#include <type_traits>

#include "core/cpu/loops.h"
#include "core/cpu/vec_math.h"
#include "core/elementwise_kernels.h"

namespace ember {

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi), gelu's tanh form
constexpr double kGeluCubic = 0.044715;

EMBER_VEC_INLINE float k_exp(float x) {
  return cpu::exp_f32(x);
}
EMBER_VEC_INLINE double k_exp(double x) {
  return std::exp(x);
}
EMBER_VEC_INLINE float k_expm1(float x) {
  return cpu::expm1_f32(x);
}
EMBER_VEC_INLINE double k_expm1(double x) {
  return std::expm1(x);
}
EMBER_VEC_INLINE float k_log1p(float x) {
  return cpu::log1p_f32(x);
}
EMBER_VEC_INLINE double k_log1p(double x) {
  return std::log1p(x);
}
EMBER_VEC_INLINE float k_tanh(float x) {
  return cpu::tanh_f32(x);
}
EMBER_VEC_INLINE double k_tanh(double x) {
  return std::tanh(x);
}
EMBER_VEC_INLINE float k_sigmoid(float x) {
  return cpu::sigmoid_f32(x);
}
// From e^-|x| so that the lower tail keeps its relative accuracy, as the float version.
EMBER_VEC_INLINE double k_sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  const double p = 1.0 / (1.0 + e);
  return cpu::blend(x >= 0.0, p, e * p);
}
EMBER_VEC_INLINE float k_normal_cdf(float x) {
  return cpu::normal_cdf_f32(x);
}
EMBER_VEC_INLINE double k_normal_cdf(double x) {
  return 0.5 * std::erfc(-x * 0.70710678118654752440);
}
EMBER_VEC_INLINE float k_normal_pdf(float x) {
  return cpu::normal_pdf_f32(x);
}
EMBER_VEC_INLINE double k_normal_pdf(double x) {
  return 0.39894228040143267794 * std::exp(-0.5 * x * x);
}

// gelu's tanh form 0.5 x (1 + tanh(u)) written as x * sigmoid(2u): the same function, without
// the cancellation of 1 + tanh(u) for negative x.
template <typename T>
EMBER_VEC_INLINE T gelu_tanh_sigmoid(T x) {
  const T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
  return k_sigmoid(T(2) * u);
}

void cpu_activation(ActivationOp op, const Tensor& out, const Tensor& a, double p0, double p1) {
  if (op == ActivationOp::Relu && !is_floating(a.dtype())) {
    EMBER_DISPATCH_NUMERIC(a.dtype(), "relu", [&] {
      using T = scalar_t;
      if constexpr (std::is_unsigned_v<T>)
        cpu::map1<T, T>(out, a, [](T x) EMBER_VEC_LAMBDA { return x; });
      else
        cpu::map1<T, T>(out, a, [](T x) EMBER_VEC_LAMBDA { return x < T(0) ? T(0) : x; });
    });
    return;
  }
  EMBER_DISPATCH_FLOAT(a.dtype(), "activation", [&] {
    using T = scalar_t;
    auto run = [&](auto f) { cpu::map1<T, T>(out, a, f); };
    const T c0 = static_cast<T>(p0), c1 = static_cast<T>(p1);
    switch (op) {
      case ActivationOp::Relu:
        run([](T x) EMBER_VEC_LAMBDA { return cpu::blend(x < T(0), T(0), x); });  // NaN stays NaN
        break;
      case ActivationOp::LeakyRelu:
        run([c0](T x) EMBER_VEC_LAMBDA { return cpu::blend(x > T(0), x, x * c0); });
        break;
      case ActivationOp::Elu:
        run([c0](T x) EMBER_VEC_LAMBDA { return cpu::blend(x > T(0), x, c0 * k_expm1(x)); });
        break;
      case ActivationOp::Gelu:
        run([](T x) EMBER_VEC_LAMBDA { return x * k_normal_cdf(x); });
        break;
      case ActivationOp::GeluTanh:
        run([](T x) EMBER_VEC_LAMBDA { return x * gelu_tanh_sigmoid(x); });
        break;
      case ActivationOp::Sigmoid:
        run([](T x) EMBER_VEC_LAMBDA { return k_sigmoid(x); });
        break;
      case ActivationOp::Tanh:
        run([](T x) EMBER_VEC_LAMBDA { return k_tanh(x); });
        break;
      case ActivationOp::Softplus: {
        const T inv_beta = T(1) / c0;
        run([c0, c1, inv_beta](T x) EMBER_VEC_LAMBDA {
          const T t = c0 * x;
          return cpu::blend(t > c1, x, k_log1p(k_exp(t)) * inv_beta);
        });
        break;
      }
      case ActivationOp::Hardtanh:  // NaN stays NaN, as in clamp
        run([c0, c1](T x) EMBER_VEC_LAMBDA { return cpu::blend(x < c0, c0, cpu::blend(x > c1, c1, x)); });
        break;
    }
  });
}

void cpu_activation_grad(ActivationOp op, const Tensor& out, const Tensor& grad, const Tensor& saved, double p0,
                         double p1) {
  EMBER_DISPATCH_FLOAT(grad.dtype(), "activation backward", [&] {
    using T = scalar_t;
    auto run = [&](auto f) { cpu::map2<T, T, T>(out, grad, saved, f); };
    const T c0 = static_cast<T>(p0), c1 = static_cast<T>(p1);
    switch (op) {
      case ActivationOp::Relu:  // from y: relu'(0) = 0
        run([](T g, T y) EMBER_VEC_LAMBDA { return cpu::blend(y > T(0), g, T(0)); });
        break;
      case ActivationOp::LeakyRelu:
        run([c0](T g, T x) EMBER_VEC_LAMBDA { return cpu::blend(x > T(0), g, g * c0); });
        break;
      case ActivationOp::Elu:
        run([c0](T g, T x) EMBER_VEC_LAMBDA { return cpu::blend(x > T(0), g, g * c0 * k_exp(x)); });
        break;
      case ActivationOp::Gelu:
        run([](T g, T x) EMBER_VEC_LAMBDA { return g * (k_normal_cdf(x) + x * k_normal_pdf(x)); });
        break;
      case ActivationOp::GeluTanh:
        run([](T g, T x) EMBER_VEC_LAMBDA {
          const T s = gelu_tanh_sigmoid(x);
          const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
          return g * (s + T(2) * x * s * (T(1) - s) * du);
        });
        break;
      case ActivationOp::Sigmoid:  // from y
        run([](T g, T y) EMBER_VEC_LAMBDA { return g * y * (T(1) - y); });
        break;
      case ActivationOp::Tanh:  // from y
        run([](T g, T y) EMBER_VEC_LAMBDA { return g * (T(1) - y * y); });
        break;
      case ActivationOp::Softplus:
        run([c0, c1](T g, T x) EMBER_VEC_LAMBDA {
          const T t = c0 * x;
          return cpu::blend(t > c1, g, g * k_sigmoid(t));
        });
        break;
      case ActivationOp::Hardtanh:  // as PyTorch: no gradient at the limits
        run([c0, c1](T g, T x) EMBER_VEC_LAMBDA { return cpu::blend((x > c0) & (x < c1), g, T(0)); });
        break;
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(activation_stub, CPU, cpu_activation);
EMBER_REGISTER_KERNEL(activation_grad_stub, CPU, cpu_activation_grad);

}  // namespace ember
