// The bfloat16 GEMM and conversions of core/cpu/bf16_gemm.h, compiled once per CPU capability
// level: at avx512bf16 the vdpbf16ps kernel and vcvtne2ps2bf16, below it the widening fallback,
// each run where this CPU has the level. The conversions must give core/half_bits.h's bits
// exactly (ties to even, NaN, inf, subnormals); the GEMM is compared with a double-precision
// product of the same bfloat16 values within float32 summation error (and, for a bfloat16 C, one
// rounding), over every transposition, edge tiles, odd k and k deeper than one block.
#include "core/cpu/bf16_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/half_bits.h"
#include "cpu_level_test.h"

using namespace ember;

namespace {

EMBER_CPU_LEVEL_FIXTURE(Bf16Kernels);

uint32_t bits(float f) {
  return float_as_bits(f);
}

// Values whose rounding the tests must see: ties both ways, the largest finite float (rounds to
// inf), infinities, quiet and signalling NaNs of both signs with payloads, zeros, subnormals
// (including a subnormal tie and one rounding up to the smallest normal).
std::vector<uint32_t> special_bits() {
  return {0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf808000u,     0x3f80ffffu,    0x7f7fffffu, 0xff7fffffu,
          0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,     0x7f800001u,    0xff812345u, 0x7fbfffffu,
          0x00000000u, 0x80000000u, 0x00000001u, 0x80008000u,     0x00018000u,    0x007fffffu, 0x807fc000u,
          0x00400000u, 0x00800000u, bits(1.0f),  bits(-3.14159f), bits(65504.0f), bits(1e-30f)};
}

EMBER_CPU_LEVEL_TEST(Bf16Kernels, ScalarReferenceRoundsToNearestEvenAndKeepsNaN) {
  // The IEEE facts the scalar reference encodes, so the comparisons below compare with the right
  // thing: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 and goes to the even 1; 1 + 3 * 2^-8 to
  // 1 + 2^-6; FLT_MAX overflows to inf; a signalling NaN becomes quiet with its sign.
  EXPECT_EQ(float_to_bf16_bits(bits_as_float(0x3f808000u)), 0x3f80u);
  EXPECT_EQ(float_to_bf16_bits(bits_as_float(0x3f818000u)), 0x3f82u);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80u);
  EXPECT_EQ(float_to_bf16_bits(bits_as_float(0xff800001u)), 0xffc0u);
  EXPECT_EQ(float_to_bf16_bits(bits_as_float(0x00018000u)), 0x0002u);  // a subnormal tie, up to even
}

EMBER_CPU_LEVEL_TEST(Bf16Kernels, ConversionMatchesTheScalarReferenceBitForBit) {
  std::vector<uint32_t> in = special_bits();
  std::mt19937 rng(51);
  for (int i = 0; i < 4000; ++i) in.push_back(rng());  // every exponent, NaNs and subnormals among them
  for (int i = 0; i < 500; ++i) in.push_back((rng() & 0xffff0000u) | 0x8000u);  // ties
  for (int i = 0; i < 300; ++i) in.push_back(rng() & 0x807fffffu);              // subnormals
  std::vector<float> f(in.size());
  for (size_t i = 0; i < in.size(); ++i) f[i] = bits_as_float(in[i]);
  // Every start and length near the vector width, so each tail and block position is taken.
  for (int64_t start : {0, 1, 17})
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{32}, int64_t{33}, int64_t{95},
                      static_cast<int64_t>(f.size()) - 17}) {
      std::vector<uint16_t> out(static_cast<size_t>(n), 0xdeadu);
      cpu::bf16_from_float(f.data() + start, out.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i], float_to_bf16_bits(f[start + i]))
            << "float bits 0x" << std::hex << in[start + i] << " (start " << std::dec << start << ", n " << n << ")";
    }
  std::vector<float> back(in.size());
  std::vector<uint16_t> b16(in.size());
  for (size_t i = 0; i < in.size(); ++i) b16[i] = static_cast<uint16_t>(in[i] >> 16);
  cpu::bf16_to_float(b16.data(), back.data(), static_cast<int64_t>(b16.size()));
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(bits(back[i]), in[i] & 0xffff0000u);
}

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
};

// A rows x cols bfloat16 matrix of normal values (no subnormals), stored with leading dimension ld.
std::vector<uint16_t> random_bf16(int64_t rows, int64_t ld, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> v(static_cast<size_t>(rows * ld));
  for (auto& x : v) x = float_to_bf16_bits(d(rng));
  return v;
}

// Runs one case through `gemm` with C float32 and bfloat16 and checks both against double.
template <typename Gemm>
void check_case(const Case& c, const Gemm& gemm) {
  std::mt19937 rng(static_cast<uint32_t>(c.m * 131 + c.n * 7 + c.k));
  const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 5, ldc = c.n + 2;
  const std::vector<uint16_t> a = random_bf16(c.ta ? c.k : c.m, lda, rng), b = random_bf16(c.tb ? c.n : c.k, ldb, rng);
  const std::vector<uint16_t> c_old = random_bf16(c.m, ldc, rng);
  auto A = [&](int64_t i, int64_t p) { return bf16_bits_to_float(c.ta ? a[p * lda + i] : a[i * lda + p]); };
  auto B = [&](int64_t p, int64_t j) { return bf16_bits_to_float(c.tb ? b[j * ldb + p] : b[p * ldb + j]); };
  // The same values as float32 moved off them by less than half a bfloat16 step either way
  // (a quarter below, where the step beneath a power of two is half as large), which rounding to
  // nearest takes away and truncation does not: the ab_float32 route must multiply exactly a and b.
  auto with_low_bits = [&rng](const std::vector<uint16_t>& v) {
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const uint32_t off = rng() % (0x3fffu + 0x7fffu + 1) - 0x3fffu;  // modulo 2^32: -0x3fff to 0x7fff
      f[i] = bits_as_float((static_cast<uint32_t>(v[i]) << 16) + off);
    }
    return f;
  };
  const std::vector<float> a32 = with_low_bits(a), b32 = with_low_bits(b);
  for (int variant = 0; variant < 4; ++variant) {
    const bool c_float32 = variant % 2 == 0, ab_float32 = variant >= 2;
    std::vector<float> c32(static_cast<size_t>(c.m * ldc));
    std::vector<uint16_t> c16 = c_old;
    for (size_t i = 0; i < c32.size(); ++i)
      c32[i] = c.beta == 0.0 ? std::numeric_limits<float>::quiet_NaN() : bf16_bits_to_float(c_old[i]);
    if (c.beta == 0.0) std::fill(c16.begin(), c16.end(), uint16_t{0x7fc0});  // NaN: must be ignored
    GemmArgs g;
    g.dtype = DType::BFloat16;
    g.trans_a = c.ta, g.trans_b = c.tb, g.m = c.m, g.n = c.n, g.k = c.k, g.alpha = c.alpha, g.beta = c.beta;
    g.a = a.data(), g.lda = lda, g.b = b.data(), g.ldb = ldb, g.ldc = ldc, g.c_float32 = c_float32;
    if (ab_float32) g.a = a32.data(), g.b = b32.data(), g.ab_float32 = true;
    g.c = c_float32 ? static_cast<void*>(c32.data()) : static_cast<void*>(c16.data());
    gemm(g);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t p = 0; p < c.k; ++p) {
          ref += static_cast<double>(A(i, p)) * B(p, j);
          mag += std::fabs(static_cast<double>(A(i, p)) * B(p, j));
        }
        const double old = bf16_bits_to_float(c_old[i * ldc + j]);
        ref = c.alpha * ref + c.beta * old;
        double tol = 4.0 * (static_cast<double>(c.k) + 2) * std::ldexp(1.0, -24) *
                     (std::fabs(c.alpha) * mag + std::fabs(c.beta * old));
        const double got = c_float32 ? c32[i * ldc + j] : bf16_bits_to_float(c16[i * ldc + j]);
        if (!c_float32) tol += std::fabs(ref) * std::ldexp(1.0, -8);
        ASSERT_NEAR(got, ref, tol) << "C[" << i << "][" << j << "] of m=" << c.m << " n=" << c.n << " k=" << c.k
                                   << " ta=" << c.ta << " tb=" << c.tb << " beta=" << c.beta << " C float32 "
                                   << c_float32 << " A, B float32 " << ab_float32;
      }
    // Past each row's n columns C is untouched.
    if (c_float32) continue;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(c16[i * ldc + j], c.beta == 0.0 ? 0x7fc0 : c_old[i * ldc + j]);
  }
}

std::vector<Case> cases() {
  std::vector<Case> v;
  // Edge tiles (m not a multiple of 12, n not of 32), odd k, one row or column, k past one block
  // (384) and columns past one packed slice (1536).
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      v.push_back({13, 37, 19, ta, tb, 1.0, 0.0});
      v.push_back({24, 64, 64, ta, tb, 0.5, 1.5});
      v.push_back({1, 45, 7, ta, tb, 1.0, 1.0});
      v.push_back({29, 1, 400, ta, tb, -2.0, 0.0});
    }
  v.push_back({100, 70, 801, false, false, 1.0, 0.5});
  v.push_back({37, 1600, 9, false, true, 1.0, 0.0});
  v.push_back({130, 33, 3, true, false, 1.0, 0.0});
  return v;
}

EMBER_CPU_LEVEL_TEST(Bf16Kernels, GemmMatchesDoubleProductOfTheSameValues) {
  for (const Case& c : cases()) check_case(c, [](const GemmArgs& g) { cpu::gemm_bf16(g); });
}

// The same through the dispatch at this level (the gemm stub's bfloat16 route), threads and all.
EMBER_CPU_LEVEL_TEST(Bf16Kernels, DispatchedGemmAtThisLevel) {
  const CpuCapability saved = cpu_capability();
  set_cpu_capability(static_cast<CpuCapability>(EMBER_CPU_LEVEL));
  for (const Case& c : cases()) check_case(c, [](const GemmArgs& g) { gemm_stub.cpu_kernel()(g); });
  for (const Case& c : cases()) check_case(c, [](const GemmArgs& g) { gemm_batched_stub.cpu_kernel()(g, 1, 0, 0, 0); });
  set_cpu_capability(saved);
}

EMBER_CPU_LEVEL_TEST(Bf16Kernels, EmptyProductsScaleC) {
  std::vector<float> c32{1.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<uint16_t> c16{float_to_bf16_bits(3.0f), 0x7fc0};
  GemmArgs g;
  g.dtype = DType::BFloat16, g.m = 1, g.n = 2, g.k = 0, g.beta = 0.0, g.ldc = 2, g.lda = 1, g.ldb = 2;
  g.c = c32.data(), g.c_float32 = true;
  cpu::gemm_bf16(g);
  EXPECT_EQ(c32, (std::vector<float>{0.0f, 0.0f}));
  g.c = c16.data(), g.c_float32 = false, g.beta = 2.0;
  c16[1] = float_to_bf16_bits(0.25f);
  cpu::gemm_bf16(g);
  EXPECT_EQ(bf16_bits_to_float(c16[0]), 6.0f);
  EXPECT_EQ(bf16_bits_to_float(c16[1]), 0.5f);
}

}  // namespace
