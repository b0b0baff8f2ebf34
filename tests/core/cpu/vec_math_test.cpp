// Accuracy of the vectorisable float32 functions of core/cpu/vec_math.h against the double
// precision std:: functions, measured in ulps of the float result over sweeps that cover each
// function's whole float range, plus the special values. Compiled once per CPU capability level
// (the FMA and AVX-512 code paths round differently from the baseline's), each run where the CPU
// has the level.
#include "core/cpu/vec_math.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "cpu_level_test.h"

using namespace ember::cpu;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Error of y against the exact value r, in units of the float ulp at r (subnormal ulp below
// FLT_MIN). An infinite or NaN reference must be matched exactly.
double ulp_error(float y, double r) {
  if (std::isnan(r)) return std::isnan(y) ? 0.0 : 1e30;
  const float rf = static_cast<float>(r);
  if (std::isinf(rf)) return y == rf ? 0.0 : 1e30;
  if (std::isnan(y) || std::isinf(y)) return 1e30;
  double ulp = std::fabs(static_cast<double>(std::nextafter(std::fabs(rf), kInf)) - std::fabs(rf));
  ulp = std::max(ulp, static_cast<double>(std::numeric_limits<float>::denorm_min()));
  return std::fabs(static_cast<double>(y) - r) / ulp;
}

struct Sweep {
  double worst = 0.0;
  float at = 0.0f;
};

// Walks [lo, hi] in steps of `stride` float bit patterns on each side of zero (so the density
// is even in ulps, covering tiny and huge magnitudes alike), plus every exact endpoint.
Sweep sweep(const std::function<float(float)>& f, const std::function<double(double)>& ref, float lo, float hi,
            uint32_t stride = 4099) {
  Sweep s;
  auto visit = [&](float x) {
    const double e = ulp_error(f(x), ref(static_cast<double>(x)));
    if (e > s.worst) {
      s.worst = e;
      s.at = x;
    }
  };
  // Positive part: bit patterns from 0 (or lo) up to hi.
  if (hi >= 0) {
    const uint32_t b0 = lo > 0 ? std::bit_cast<uint32_t>(lo) : 0u, b1 = std::bit_cast<uint32_t>(hi);
    for (uint64_t b = b0; b <= b1; b += stride) visit(std::bit_cast<float>(static_cast<uint32_t>(b)));
    visit(hi);
  }
  if (lo < 0) {
    const uint32_t b0 = hi < 0 ? std::bit_cast<uint32_t>(hi) : 0x80000000u, b1 = std::bit_cast<uint32_t>(lo);
    for (uint64_t b = b0; b <= b1; b += stride) visit(std::bit_cast<float>(static_cast<uint32_t>(b)));
    visit(lo);
  }
  return s;
}

double ref_sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double ref_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}
double ref_pdf(double x) {
  return std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

}  // namespace

EMBER_CPU_LEVEL_FIXTURE(VecMath);

EMBER_CPU_LEVEL_TEST(VecMath, ExpWithinOneUlpOverTheWholeRange) {
  Sweep s = sweep(
      exp_f32, [](double x) { return std::exp(x); }, -110.0f, 100.0f);
  EXPECT_LE(s.worst, 1.5) << "at x = " << s.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, LogWithinOneUlpIncludingSubnormals) {
  Sweep s = sweep(
      log_f32, [](double x) { return std::log(x); }, 0.0f, std::numeric_limits<float>::max());
  EXPECT_LE(s.worst, 1.5) << "at x = " << s.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, Log1pAccurateNearZeroAndFar) {
  Sweep s = sweep(
      log1p_f32, [](double x) { return std::log1p(x); }, -1.0f, std::numeric_limits<float>::max());
  EXPECT_LE(s.worst, 3.0) << "at x = " << s.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, Expm1AccurateNearZeroAndFar) {
  Sweep s = sweep(
      expm1_f32, [](double x) { return std::expm1(x); }, -110.0f, 100.0f);
  EXPECT_LE(s.worst, 4.0) << "at x = " << s.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, TanhWithinTwoUlps) {
  Sweep s = sweep(
      tanh_f32, [](double x) { return std::tanh(x); }, -50.0f, 50.0f);
  EXPECT_LE(s.worst, 2.0) << "at x = " << s.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, SigmoidKeepsRelativeAccuracyInTheLowerTail) {
  Sweep s = sweep(sigmoid_f32, ref_sigmoid, -110.0f, 110.0f);
  EXPECT_LE(s.worst, 3.0) << "at x = " << s.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, ErfcAndNormalCdfPdfAccurateInTheTails) {
  Sweep e = sweep(
      erfc_f32, [](double x) { return std::erfc(x); }, -12.0f, 12.0f);
  EXPECT_LE(e.worst, 6.0) << "erfc at x = " << e.at;
  Sweep c = sweep(normal_cdf_f32, ref_cdf, -16.0f, 16.0f);
  EXPECT_LE(c.worst, 6.0) << "normal_cdf at x = " << c.at;
  Sweep p = sweep(normal_pdf_f32, ref_pdf, -16.0f, 16.0f);
  EXPECT_LE(p.worst, 4.0) << "normal_pdf at x = " << p.at;
}

EMBER_CPU_LEVEL_TEST(VecMath, SpecialValues) {
  EXPECT_EQ(exp_f32(kInf), kInf);
  EXPECT_EQ(exp_f32(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(exp_f32(kNaN)));
  EXPECT_EQ(exp_f32(89.0f), kInf);
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_GT(exp_f32(-100.0f), 0.0f);  // subnormal, not flushed
  EXPECT_EQ(exp_f32(-104.0f), 0.0f);

  EXPECT_EQ(log_f32(0.0f), -kInf);
  EXPECT_EQ(log_f32(-0.0f), -kInf);
  EXPECT_TRUE(std::isnan(log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(log_f32(-kInf)));
  EXPECT_TRUE(std::isnan(log_f32(kNaN)));
  EXPECT_EQ(log_f32(kInf), kInf);
  EXPECT_EQ(log_f32(1.0f), 0.0f);
  EXPECT_FLOAT_EQ(log_f32(std::numeric_limits<float>::denorm_min()),
                  std::log(std::numeric_limits<float>::denorm_min()));

  EXPECT_EQ(log1p_f32(-1.0f), -kInf);
  EXPECT_TRUE(std::isnan(log1p_f32(-2.0f)));
  EXPECT_EQ(log1p_f32(kInf), kInf);
  EXPECT_EQ(log1p_f32(1e-30f), 1e-30f);

  EXPECT_EQ(expm1_f32(-kInf), -1.0f);
  EXPECT_EQ(expm1_f32(kInf), kInf);
  EXPECT_EQ(expm1_f32(1e-30f), 1e-30f);

  EXPECT_EQ(tanh_f32(kInf), 1.0f);
  EXPECT_EQ(tanh_f32(-kInf), -1.0f);
  EXPECT_TRUE(std::signbit(tanh_f32(-0.0f)));
  EXPECT_TRUE(std::isnan(tanh_f32(kNaN)));

  EXPECT_EQ(sigmoid_f32(kInf), 1.0f);
  EXPECT_EQ(sigmoid_f32(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(sigmoid_f32(kNaN)));

  EXPECT_EQ(normal_cdf_f32(kInf), 1.0f);
  EXPECT_EQ(normal_cdf_f32(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(normal_cdf_f32(kNaN)));
  EXPECT_EQ(erfc_f32(kInf), 0.0f);
  EXPECT_EQ(erfc_f32(-kInf), 2.0f);
  EXPECT_TRUE(std::isnan(erfc_f32(kNaN)));
}

EMBER_CPU_LEVEL_TEST(VecMath, BlendPicksBitForBit) {
  EXPECT_TRUE(std::signbit(blend(true, -0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(blend(false, -0.0f, 0.0f)));
  EXPECT_TRUE(std::isnan(blend(true, kNaN, 1.0f)));
  EXPECT_EQ(blend(false, std::nan(""), 2.0), 2.0);
}
