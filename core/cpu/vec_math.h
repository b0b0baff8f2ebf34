// Branch-free float32 versions of the transcendental functions that training spends its
// elementwise time in (exp, log, tanh, sigmoid, the normal CDF behind gelu). std::expf and
// friends are opaque library calls that keep a loop scalar unless -ffast-math is on; these are
// inline arithmetic, bit operations and selects only, so a `#pragma omp simd` loop over them
// compiles to AVX2/AVX-512 code. Each handles the whole float range: overflow to inf, underflow
// through subnormals to 0, NaN in gives NaN out. Accuracy is a few ulp (tests/core/
// vec_math_test.cpp measures it against the double-precision std:: functions); float64 kernels
// keep using std::, which is correctly rounded enough and whose cost matters less there.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "core/cpu/capability.h"

// Forced inline: GCC's heuristics otherwise leave some of these out of line at some call sites,
// and an opaque call keeps the whole loop scalar.
// EMBER_VEC_LAMBDA does the same for a kernel's per-element lambda, which GCC will otherwise
// call out of line once the inlined math makes it big: `[](float x) EMBER_VEC_LAMBDA { ... }`.
#if defined(__GNUC__)
#define EMBER_VEC_INLINE inline __attribute__((always_inline))
#define EMBER_VEC_LAMBDA __attribute__((always_inline))
#else
#define EMBER_VEC_INLINE inline
#define EMBER_VEC_LAMBDA
#endif

namespace ember::cpu {
inline namespace EMBER_CPU_NS {

// c ? a : b as a bit blend. A plain ?: between two computed values lets GCC sink each
// computation into its own branch, and under the default -ftrapping-math it will not speculate
// floating-point work back out of a branch, so the loop stays scalar; the blend keeps both
// values live and the loop vectorises. Use it in every elementwise lambda that picks between
// computed floating-point values.
EMBER_VEC_INLINE float blend(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((m & std::bit_cast<uint32_t>(a)) | (~m & std::bit_cast<uint32_t>(b)));
}
EMBER_VEC_INLINE double blend(bool c, double a, double b) {
  const uint64_t m = 0u - static_cast<uint64_t>(c);
  return std::bit_cast<double>((m & std::bit_cast<uint64_t>(a)) | (~m & std::bit_cast<uint64_t>(b)));
}

namespace vm_detail {

// a * b + c, fused when the target has FMA (then it is one instruction and one rounding).
EMBER_VEC_INLINE float fmadd(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// 2^n for integer n in [-126, 127], built from the exponent bits.
EMBER_VEC_INLINE float pow2i(int32_t n) {
  return std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
}

}  // namespace vm_detail

// e^x. Cephes' expf: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so that n*ln2 is exact),
// a degree-5 polynomial for e^r, then a scale by 2^n applied as two factors so that results in
// the subnormal range and up to FLT_MAX come out right without special cases.
EMBER_VEC_INLINE float exp_f32(float x) {
  using namespace vm_detail;
  // Beyond these the result is 0 or inf anyway; the clamp keeps n small. Selects, not
  // std::min/max, so that NaN passes through unchanged.
  x = x > 89.0f ? 89.0f : x;
  x = x < -104.0f ? -104.0f : x;
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = fmadd(x, 1.44269504088896341f, kMagic);
  const float fn = t - kMagic;
  const int32_t n = static_cast<int32_t>(std::bit_cast<uint32_t>(t) - std::bit_cast<uint32_t>(kMagic));
  float r = fmadd(fn, -0.693359375f, x);
  r = fmadd(fn, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmadd(p, r, 1.3981999507e-3f);
  p = fmadd(p, r, 8.3334519073e-3f);
  p = fmadd(p, r, 4.1665795894e-2f);
  p = fmadd(p, r, 1.6666665459e-1f);
  p = fmadd(p, r, 5.0000001201e-1f);
  p = fmadd(p, r * r, r) + 1.0f;
  const int32_t n1 = n >> 1;  // arithmetic shift: floor(n / 2)
  return p * pow2i(n1) * pow2i(n - n1);
}

// ln x. Cephes' logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a degree-8 polynomial in m - 1.
// Subnormal inputs are first scaled by 2^23 into the normal range.
EMBER_VEC_INLINE float log_f32(float x) {
  using namespace vm_detail;
  const bool tiny = x < 1.17549435e-38f;  // below FLT_MIN (also true for 0 and negatives)
  const float xs = x * blend(tiny, 8388608.0f, 1.0f);
  const uint32_t bits = std::bit_cast<uint32_t>(xs);
  const int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 126;
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  m = fmadd(m, blend(small, 2.0f, 1.0f), -1.0f);  // exact: m*2 and m are representable
  const float fe = static_cast<float>(e - static_cast<int32_t>(small)) - blend(tiny, 23.0f, 0.0f);
  const float z = m * m;
  float p = 7.0376836292e-2f;
  p = fmadd(p, m, -1.1514610310e-1f);
  p = fmadd(p, m, 1.1676998740e-1f);
  p = fmadd(p, m, -1.2420140846e-1f);
  p = fmadd(p, m, 1.4249322787e-1f);
  p = fmadd(p, m, -1.6668057665e-1f);
  p = fmadd(p, m, 2.0000714765e-1f);
  p = fmadd(p, m, -2.4999993993e-1f);
  p = fmadd(p, m, 3.3333331174e-1f);
  float y = p * m * z;
  y = fmadd(fe, -2.12194440e-4f, y);
  y = fmadd(z, -0.5f, y);
  float r = fmadd(fe, 0.693359375f, m + y);
  // Special values: log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
  r = blend(x == 0.0f, -INFINITY, r);
  r = blend(x < 0.0f, NAN, r);
  r = blend(x == INFINITY, INFINITY, r);
  return blend(x != x, x, r);
}

// ln(1 + x) with full relative accuracy for tiny x: log(u) * x / (u - 1) with u = 1 + x cancels
// the rounding error of u (Goldberg's trick).
EMBER_VEC_INLINE float log1p_f32(float x) {
  using namespace vm_detail;
  const float u = 1.0f + x;
  const float d = u - 1.0f;
  const float r = log_f32(u) * (x / d);
  return blend(d == 0.0f || x == INFINITY, x, r);
}

// e^x - 1: a polynomial near 0, where e^x - 1 would cancel, e^x - 1 elsewhere (at most ~2 bits
// lost there, since |e^x - 1| >= 0.29 when |x| >= ln2/2).
EMBER_VEC_INLINE float expm1_f32(float x) {
  using namespace vm_detail;
  float p = 1.9875691500e-4f;
  p = fmadd(p, x, 1.3981999507e-3f);
  p = fmadd(p, x, 8.3334519073e-3f);
  p = fmadd(p, x, 4.1665795894e-2f);
  p = fmadd(p, x, 1.6666665459e-1f);
  p = fmadd(p, x, 5.0000001201e-1f);
  p = fmadd(p, x * x, x);
  const float e = exp_f32(x) - 1.0f;
  return blend(std::fabs(x) < 0.34657359f, p, e);
}

// tanh x: an odd polynomial for |x| < 0.625, 1 - 2 / (e^{2|x|} + 1) with the sign restored
// beyond (which saturates to +-1 without overflow trouble: 2 / inf = 0).
EMBER_VEC_INLINE float tanh_f32(float x) {
  using namespace vm_detail;
  const float ax = std::fabs(x);
  const float s = x * x;
  float p = -6.0967141659081976e-3f;
  p = fmadd(p, s, 2.0997178999074751e-2f);
  p = fmadd(p, s, -5.3850909578513581e-2f);
  p = fmadd(p, s, 1.3332769736976328e-1f);
  p = fmadd(p, s, -3.3333328944134255e-1f);
  const float small = fmadd(p * s, ax, ax);
  const float big = 1.0f - 2.0f / (exp_f32(ax + ax) + 1.0f);
  return std::copysign(blend(ax < 0.625f, small, big), x);
}

// 1 / (1 + e^-x), computed from e^-|x| so that the lower tail keeps its relative accuracy
// (1 / (1 + inf) would flush sigmoid(-89) to 0).
EMBER_VEC_INLINE float sigmoid_f32(float x) {
  using namespace vm_detail;
  const float e = exp_f32(-std::fabs(x));
  const float p = 1.0f / (1.0f + e);
  return blend(x >= 0.0f, p, e * p);
}

namespace vm_detail {

// erfc(a) for a >= 0 (NaN for NaN), given a^2 = s + ds as an unevaluated sum (the rounding error
// of a*a would otherwise cost up to 2^-17 relative at a = 10, and that of a = x / sqrt 2 more).
// A polynomial approximates (1 + 2a) e^{a^2} erfc(a) - 1 in q = (a - 2) / (a + 2), which maps
// [0, inf) onto [-1, 1); it is a Chebyshev fit to high-precision values for a in [0, 10].
// erfc(a) underflows to 0 beyond a ~ 10.05.
EMBER_VEC_INLINE float erfc_nonneg(float a, float s, float ds) {
  const float q = (a - 2.0f) / (a + 2.0f);
  float p = 8.3000416026441677e-5f;
  p = fmadd(p, q, 1.7610272115004042e-4f);
  p = fmadd(p, q, -4.0184536025119285e-4f);
  p = fmadd(p, q, -1.4283991050739868e-3f);
  p = fmadd(p, q, 1.2511904468428335e-3f);
  p = fmadd(p, q, 8.7121546628314999e-3f);
  p = fmadd(p, q, -8.0300340738941481e-3f);
  p = fmadd(p, q, -5.4218342602670220e-2f);
  p = fmadd(p, q, 1.6405091383699891e-1f);
  p = fmadd(p, q, -1.6603049016917845e-1f);
  p = fmadd(p, q, -9.2763816009293737e-2f);
  p = fmadd(p, q, 2.7697838235709469e-1f);
  const float h = (p + 1.0f) / fmadd(2.0f, a, 1.0f);
  const float r = h * exp_f32(-s);
  return blend(a > 10.1f, 0.0f, fmadd(-r, ds, r));  // e^{-ds} ~ 1 - ds
}

// x*x as s + ds exactly: one FMA, or Dekker's product (Veltkamp split) without one.
EMBER_VEC_INLINE void square_split(float x, float& s, float& ds) {
  s = x * x;
#if defined(__FMA__)
  ds = std::fma(x, x, -s);
#else
  const float c = x * 4097.0f;
  const float hi = c - (c - x);
  const float lo = x - hi;
  ds = ((hi * hi - s) + 2.0f * hi * lo) + lo * lo;
#endif
}

}  // namespace vm_detail

// erfc(x).
EMBER_VEC_INLINE float erfc_f32(float x) {
  using namespace vm_detail;
  float s, ds;
  square_split(x, s, ds);
  const float e = erfc_nonneg(std::fabs(x), s, ds);
  return blend(x < 0.0f, 2.0f - e, e);
}

// The standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, with relative accuracy in the lower
// tail (gelu(x) = x Phi(x) there is a tiny number, not a cancellation). (x / sqrt 2)^2 is
// computed from x, not from the rounded x / sqrt 2: the tail's relative condition number is
// about x^2, so half an ulp in the argument would cost ~x^2 / 2 ulps in the result.
EMBER_VEC_INLINE float normal_cdf_f32(float x) {
  using namespace vm_detail;
  float s, ds;
  square_split(x, s, ds);
  const float h = 0.5f * erfc_nonneg(std::fabs(x) * 0.70710678118654752f, 0.5f * s, 0.5f * ds);
  return blend(x > 0.0f, 1.0f - h, h);
}

// The standard normal density (x^2 split as in normal_cdf_f32, for the same reason).
EMBER_VEC_INLINE float normal_pdf_f32(float x) {
  using namespace vm_detail;
  float s, ds;
  square_split(x, s, ds);
  const float e = 0.39894228040143268f * exp_f32(-0.5f * s);
  return fmadd(-e, 0.5f * ds, e);
}

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
