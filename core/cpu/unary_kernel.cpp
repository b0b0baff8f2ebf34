// CPU kernels for the one-operand math ops (neg, abs, exp, log, sqrt, clamp, pow, ...) and their
// fused gradients. float32 transcendentals use core/cpu/vec_math.h so that contiguous loops
// vectorise; float64 uses std::.
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#endif

#include "core/cpu/elementwise_loops.h"
#include "core/cpu/vec_math.h"
#include "core/elementwise_kernels.h"
#include "core/int_pow.h"

namespace ember {

namespace {

EMBER_VEC_INLINE float k_exp(float x) {
  return cpu::exp_f32(x);
}
EMBER_VEC_INLINE double k_exp(double x) {
  return std::exp(x);
}
EMBER_VEC_INLINE float k_log(float x) {
  return cpu::log_f32(x);
}
EMBER_VEC_INLINE double k_log(double x) {
  return std::log(x);
}
EMBER_VEC_INLINE float k_log1p(float x) {
  return cpu::log1p_f32(x);
}
EMBER_VEC_INLINE double k_log1p(double x) {
  return std::log1p(x);
}

// sqrt(x), or 1 / sqrt(x), over a contiguous run. std::sqrt keeps a loop scalar (it may set
// errno, so GCC guards every call with a branch), hence the explicit vector instructions.
template <typename T, bool Recip>
void sqrt_run(T* o, const T* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float>) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
      __m256 v = _mm256_sqrt_ps(_mm256_loadu_ps(x + i));
      if constexpr (Recip) v = _mm256_div_ps(one, v);
      _mm256_storeu_ps(o + i, v);
    }
  } else {
    const __m256d one = _mm256_set1_pd(1.0);
    for (; i + 4 <= n; i += 4) {
      __m256d v = _mm256_sqrt_pd(_mm256_loadu_pd(x + i));
      if constexpr (Recip) v = _mm256_div_pd(one, v);
      _mm256_storeu_pd(o + i, v);
    }
  }
#elif defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m128 one = _mm_set1_ps(1.0f);
    for (; i + 4 <= n; i += 4) {
      __m128 v = _mm_sqrt_ps(_mm_loadu_ps(x + i));
      if constexpr (Recip) v = _mm_div_ps(one, v);
      _mm_storeu_ps(o + i, v);
    }
  } else {
    const __m128d one = _mm_set1_pd(1.0);
    for (; i + 2 <= n; i += 2) {
      __m128d v = _mm_sqrt_pd(_mm_loadu_pd(x + i));
      if constexpr (Recip) v = _mm_div_pd(one, v);
      _mm_storeu_pd(o + i, v);
    }
  }
#endif
  for (; i < n; ++i) o[i] = Recip ? T(1) / std::sqrt(x[i]) : std::sqrt(x[i]);
}

template <typename T, bool Recip>
void run_sqrt(const Tensor& out, const Tensor& a) {
  cpu::map1_runs<T>(
      out, a, [](T* o, const T* x, int64_t n) { sqrt_run<T, Recip>(o, x, n); },
      [](T x) EMBER_VEC_LAMBDA { return Recip ? T(1) / std::sqrt(x) : std::sqrt(x); });
}

// A double bound as T: saturated to T's range for integers (the op promotes to float when a
// bound is not an integer), as is for floats (so -inf/inf mean no bound).
template <typename T>
T bound_as(double v) {
  if constexpr (std::is_integral_v<T>) {
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
void run_pow_scalar(const Tensor& out, const Tensor& a, double e) {
  auto run = [&](auto f) { cpu::map1<T, T>(out, a, f); };
  if constexpr (std::is_integral_v<T>) {
    const uint64_t n = static_cast<uint64_t>(e);  // the op checked: a non-negative integer
    run([n](T x) EMBER_VEC_LAMBDA { return pow_by_squaring(x, n); });
  } else {
    // The common exponents as plain arithmetic (exact where pow would be, and vectorised).
    if (e == 0.0) {
      run([](T) { return T(1); });
    } else if (e == 1.0) {
      run([](T x) EMBER_VEC_LAMBDA { return x; });
    } else if (e == 2.0) {
      run([](T x) EMBER_VEC_LAMBDA { return x * x; });
    } else if (e == 3.0) {
      run([](T x) EMBER_VEC_LAMBDA { return x * x * x; });
    } else if (e == -1.0) {
      run([](T x) EMBER_VEC_LAMBDA { return T(1) / x; });
    } else if (e == -2.0) {
      run([](T x) EMBER_VEC_LAMBDA { return T(1) / (x * x); });
    } else if (e == 0.5) {
      run_sqrt<T, false>(out, a);
    } else if (e == -0.5) {
      run_sqrt<T, true>(out, a);
    } else {
      const T te = static_cast<T>(e);
      run([te](T x) EMBER_VEC_LAMBDA { return static_cast<T>(std::pow(x, te)); });
    }
  }
}

template <typename T>
void unary_impl(UnaryOp op, const Tensor& out, const Tensor& a, double p0, double p1) {
  auto run = [&](auto f) { cpu::map1<T, T>(out, a, f); };
  switch (op) {
    case UnaryOp::Neg:
      run([](T x) EMBER_VEC_LAMBDA { return static_cast<T>(-x); });
      return;
    case UnaryOp::Abs:
      if constexpr (std::is_floating_point_v<T>)
        run([](T x) EMBER_VEC_LAMBDA { return std::fabs(x); });
      else if constexpr (std::is_signed_v<T>)
        run([](T x) EMBER_VEC_LAMBDA { return static_cast<T>(x < 0 ? -x : x); });
      else
        run([](T x) EMBER_VEC_LAMBDA { return x; });
      return;
    case UnaryOp::Sign:
      if constexpr (std::is_unsigned_v<T>)
        run([](T x) EMBER_VEC_LAMBDA { return static_cast<T>(x != 0); });
      else
        run([](T x) EMBER_VEC_LAMBDA { return static_cast<T>((T(0) < x) - (x < T(0))); });
      return;
    case UnaryOp::Square:
      run([](T x) EMBER_VEC_LAMBDA { return static_cast<T>(x * x); });
      return;
    case UnaryOp::Clamp: {
      const T lo = bound_as<T>(p0), hi = bound_as<T>(p1);
      // min(max(x, lo), hi) as PyTorch: NaN stays NaN, and lo > hi gives hi everywhere.
      run([lo, hi](T x) EMBER_VEC_LAMBDA {
        const T t = x < lo ? lo : x;
        return t > hi ? hi : t;
      });
      return;
    }
    case UnaryOp::Pow:
      run_pow_scalar<T>(out, a, p0);
      return;
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    EMBER_FAIL("unary op: integer operands must be converted to a floating dtype first");
  } else {
    switch (op) {
      case UnaryOp::Exp:
        run([](T x) EMBER_VEC_LAMBDA { return k_exp(x); });
        break;
      case UnaryOp::Log:
        run([](T x) EMBER_VEC_LAMBDA { return k_log(x); });
        break;
      case UnaryOp::Log1p:
        run([](T x) EMBER_VEC_LAMBDA { return k_log1p(x); });
        break;
      case UnaryOp::Sqrt:
        run_sqrt<T, false>(out, a);
        break;
      case UnaryOp::Rsqrt:
        run_sqrt<T, true>(out, a);
        break;
      default:
        break;
    }
  }
}

void cpu_unary(UnaryOp op, const Tensor& out, const Tensor& a, double p0, double p1) {
  EMBER_DISPATCH_NUMERIC(a.dtype(), "unary op", [&] { unary_impl<scalar_t>(op, out, a, p0, p1); });
}

void cpu_unary_grad(UnaryGradOp op, const Tensor& out, const Tensor& grad, const Tensor& saved, double p0, double p1) {
  EMBER_DISPATCH_FLOAT(grad.dtype(), "unary op backward", [&] {
    using T = scalar_t;
    auto run = [&](auto f) { cpu::map2<T, T, T>(out, grad, saved, f); };
    switch (op) {
      case UnaryGradOp::Abs:
        run([](T g, T x) EMBER_VEC_LAMBDA { return g * static_cast<T>((T(0) < x) - (x < T(0))); });
        break;
      case UnaryGradOp::Exp:
        run([](T g, T y) EMBER_VEC_LAMBDA { return g * y; });
        break;
      case UnaryGradOp::Log:
        run([](T g, T x) EMBER_VEC_LAMBDA { return g / x; });
        break;
      case UnaryGradOp::Log1p:
        run([](T g, T x) EMBER_VEC_LAMBDA { return g / (T(1) + x); });
        break;
      case UnaryGradOp::Sqrt:
        run([](T g, T y) EMBER_VEC_LAMBDA { return g / (T(2) * y); });
        break;
      case UnaryGradOp::Rsqrt:
        run([](T g, T y) EMBER_VEC_LAMBDA { return T(-0.5) * g * y * y * y; });
        break;
      case UnaryGradOp::Square:
        run([](T g, T x) EMBER_VEC_LAMBDA { return T(2) * g * x; });
        break;
      case UnaryGradOp::Clamp: {
        const T lo = static_cast<T>(p0), hi = static_cast<T>(p1);
        run([lo, hi](T g, T x) EMBER_VEC_LAMBDA { return cpu::blend(x >= lo && x <= hi, g, T(0)); });
        break;
      }
      case UnaryGradOp::Pow: {
        const T e = static_cast<T>(p0);
        if (p0 == 0.0)
          run([](T, T) { return T(0); });
        else if (p0 == 1.0)
          run([](T g, T) { return g; });
        else if (p0 == 2.0)
          run([](T g, T x) EMBER_VEC_LAMBDA { return T(2) * g * x; });
        else if (p0 == 3.0)
          run([](T g, T x) EMBER_VEC_LAMBDA { return T(3) * g * x * x; });
        else if (p0 == -1.0)
          run([](T g, T x) EMBER_VEC_LAMBDA { return -g / (x * x); });
        else
          run([e](T g, T x) EMBER_VEC_LAMBDA { return g * e * static_cast<T>(std::pow(x, e - T(1))); });
        break;
      }
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(unary_stub, CPU, cpu_unary);
EMBER_REGISTER_KERNEL(unary_grad_stub, CPU, cpu_unary_grad);

}  // namespace ember
