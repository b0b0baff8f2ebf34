// bfloat16 GEMM and conversions (core/cpu/bf16_gemm.h). At the avx512bf16 level: a packed,
// blocked GEMM around a vdpbf16ps micro-kernel (core/cpu/bf16_gemm_avx512bf16.h); below it, the
// operands widened to float32 and one SGEMM.
#include "core/cpu/bf16_gemm.h"

#include <cblas.h>

#include <cstring>
#include <vector>

#include "core/half_bits.h"

#if defined(__AVX512BF16__)
#include "core/cpu/bf16_gemm_avx512bf16.h"
#endif

namespace ember::cpu {
inline namespace EMBER_CPU_NS {

namespace {

// The k == 0 / alpha == 0 case: C = beta * C, where a beta of 0 ignores C's old contents (NaN too).
void scale_c(const GemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    if (g.c_float32) {
      float* row = static_cast<float*>(g.c) + i * g.ldc;
      for (int64_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0 ? 0.0f : static_cast<float>(g.beta) * row[j];
    } else {
      uint16_t* row = static_cast<uint16_t*>(g.c) + i * g.ldc;
      for (int64_t j = 0; j < g.n; ++j)
        row[j] = g.beta == 0.0 ? 0 : float_to_bf16_bits(static_cast<float>(g.beta) * bf16_bits_to_float(row[j]));
    }
  }
}

// A float32 C for the product: g.c itself when it is float32, else a dense copy (widened when beta
// reads it), rounded back by finish_c.
float* float_c(const GemmArgs& g, std::vector<float>& scratch, int64_t* ldc) {
  if (g.c_float32) {
    *ldc = g.ldc;
    return static_cast<float*>(g.c);
  }
  scratch.assign(static_cast<size_t>(g.m * g.n), 0.0f);
  if (g.beta != 0.0)
    for (int64_t i = 0; i < g.m; ++i)
      bf16_to_float(static_cast<const uint16_t*>(g.c) + i * g.ldc, &scratch[i * g.n], g.n);
  *ldc = g.n;
  return scratch.data();
}

void finish_c(const GemmArgs& g, const std::vector<float>& scratch) {
  if (g.c_float32) return;
  for (int64_t i = 0; i < g.m; ++i) bf16_from_float(&scratch[i * g.n], static_cast<uint16_t*>(g.c) + i * g.ldc, g.n);
}

#if !defined(__AVX512BF16__)
// The stored rows x cols bfloat16 matrix at p (leading dimension ld) as dense float32; a float32
// one (ab_float32) rounded to bfloat16's precision.
std::vector<float> widen(const GemmArgs& g, const void* p, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  std::vector<uint16_t> row16(static_cast<size_t>(g.ab_float32 ? cols : 0));
  for (int64_t i = 0; i < rows; ++i) {
    const uint16_t* src = static_cast<const uint16_t*>(p) + i * ld;
    if (g.ab_float32) {
      bf16_from_float(static_cast<const float*>(p) + i * ld, row16.data(), cols);
      src = row16.data();
    }
    bf16_to_float(src, out.data() + i * cols, cols);
  }
  return out;
}

// Without AVX512-BF16: widen A and B (as stored, so the transpositions stay SGEMM's) and multiply
// in float32. The products of bfloat16 values are exact in float32, so this computes what the
// vdpbf16ps kernel does up to the order of the float32 additions.
void gemm_widened(const GemmArgs& g, float* c, int64_t ldc) {
  const std::vector<float> a = widen(g, g.a, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda);
  const std::vector<float> b = widen(g, g.b, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb);
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              static_cast<float>(g.alpha), a.data(), g.trans_a ? m : k, b.data(), g.trans_b ? k : n,
              static_cast<float>(g.beta), c, static_cast<int>(ldc));
}
#endif

}  // namespace

// Both conversions are written as integer arithmetic on the bits, branch-free, so the compiler
// vectorises them at every level (the widening and rounding copies around 16-bit layers are
// whole-tensor passes; scalar, they cost as much as the GEMMs they feed).
void bf16_to_float(const uint16_t* src, float* dst, int64_t n) {
  auto* d = reinterpret_cast<uint32_t*>(dst);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint32_t>(src[i]) << 16;
}

void bf16_from_float(const float* src, uint16_t* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint32_t*>(src);
  // core/half_bits.h's float_to_bf16_bits with its NaN branch made a select.
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t x = s[i];
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, quiet_nan = (x >> 16) | 0x40u;
    dst[i] = static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

void gemm_bf16(const GemmArgs& g) {
  EMBER_CHECK(g.dtype == DType::BFloat16, "gemm_bf16: dtype ", dtype_name(g.dtype), " (expected bfloat16)");
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0 || g.alpha == 0.0) return scale_c(g);
  std::vector<float> scratch;
  int64_t ldc = 0;
  float* c = float_c(g, scratch, &ldc);
#if defined(__AVX512BF16__)
  if (g.ab_float32)
    bf16x::gemm<float>(g, c, ldc);
  else
    bf16x::gemm<uint16_t>(g, c, ldc);
#else
  gemm_widened(g, c, ldc);
#endif
  finish_c(g, scratch);
}

void sgemm_as_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                   const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k < kBf16MinK) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
    return;
  }
  // The operands go to the bfloat16 GEMM as they are: it rounds them while packing its panels.
  GemmArgs g;
  g.dtype = DType::BFloat16;
  g.c_float32 = true;
  g.ab_float32 = true;
  g.trans_a = ta, g.trans_b = tb, g.m = m, g.n = n, g.k = k, g.alpha = alpha, g.beta = beta;
  g.a = a, g.lda = lda, g.b = b, g.ldb = ldb, g.c = c, g.ldc = ldc;
  gemm_stub.cpu_kernel()(g);
}

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
