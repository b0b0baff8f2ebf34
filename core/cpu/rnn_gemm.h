// The per-step GEMMs of the CPU recurrent kernels (core/cpu/rnn_kernel.cpp): h_{t-1} W_hh^T in
// forward and dG_t W_hh in backward are small in the batch dimension, and a BLAS call would
// repack all of W_hh at every step. Instead each thread packs its share of W_hh once per call
// into panels of kPanel columns and runs a register-blocked kernel over them at every step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/cpu/capability.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace rnn {

// A panel: K rows of kPanel contiguous values (zero-padded past the operand's last column),
// 64-byte aligned.
constexpr int64_t kPanel = 16;
constexpr int64_t kBlockK = 256;  // a panel's K-block (16 KB of floats) stays in L1 across row blocks
constexpr int kMaxRows = 6;       // rows per register block: 12 accumulators of 8 floats

// C[0:MR, 0:width] (+)= A[0:MR, 0:kc] P[0:kc, 0:kPanel]; the portable version.
template <int MR, typename T>
inline void micro_kernel(int64_t kc, const T* a, int64_t lda, const T* p, T* c, int64_t ldc, int64_t width,
                         bool accumulate) {
  T acc[MR][kPanel];
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < kPanel; ++j) acc[i][j] = accumulate && j < width ? c[i * ldc + j] : T(0);
  for (int64_t k = 0; k < kc; ++k) {
    const T* pk = p + k * kPanel;
    for (int i = 0; i < MR; ++i) {
      const T av = a[i * lda + k];
      for (int64_t j = 0; j < kPanel; ++j) acc[i][j] += av * pk[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < width; ++j) c[i * ldc + j] = acc[i][j];
}

#if defined(__AVX2__) && defined(__FMA__)
// float with AVX2/FMA: two 8-float accumulators per row, the A value broadcast from memory. The
// accumulators are named variables (not arrays) so that they live in registers.
#define EMBER_RNN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int MR>
inline void micro_kernel_avx2(int64_t kc, const float* a, int64_t lda, const float* p, float* c, int64_t ldc,
                              int64_t width, bool accumulate) {
  static_assert(MR >= 1 && MR <= kMaxRows);
  alignas(32) float tile[kMaxRows][kPanel];
  const bool full = width == kPanel;
  if (accumulate && !full)
    for (int i = 0; i < MR; ++i)
      for (int64_t j = 0; j < kPanel; ++j) tile[i][j] = j < width ? c[i * ldc + j] : 0.0f;
#define EMBER_RNN_DECL(i) __m256 lo##i = _mm256_setzero_ps(), hi##i = _mm256_setzero_ps();
  EMBER_RNN_ROWS(EMBER_RNN_DECL)
#undef EMBER_RNN_DECL
  if (accumulate) {
#define EMBER_RNN_LOAD(i)                            \
  if constexpr (MR > i) {                            \
    const float* src = full ? c + i * ldc : tile[i]; \
    lo##i = _mm256_loadu_ps(src);                    \
    hi##i = _mm256_loadu_ps(src + 8);                \
  }
    EMBER_RNN_ROWS(EMBER_RNN_LOAD)
#undef EMBER_RNN_LOAD
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(p + k * kPanel), b1 = _mm256_load_ps(p + k * kPanel + 8);
#define EMBER_RNN_FMA(i)                                    \
  if constexpr (MR > i) {                                   \
    const __m256 av = _mm256_broadcast_ss(a + i * lda + k); \
    lo##i = _mm256_fmadd_ps(av, b0, lo##i);                 \
    hi##i = _mm256_fmadd_ps(av, b1, hi##i);                 \
  }
    EMBER_RNN_ROWS(EMBER_RNN_FMA)
#undef EMBER_RNN_FMA
  }
#define EMBER_RNN_STORE(i)                     \
  if constexpr (MR > i) {                      \
    float* dst = full ? c + i * ldc : tile[i]; \
    _mm256_storeu_ps(dst, lo##i);              \
    _mm256_storeu_ps(dst + 8, hi##i);          \
  }
  EMBER_RNN_ROWS(EMBER_RNN_STORE)
#undef EMBER_RNN_STORE
  if (!full)
    for (int i = 0; i < MR; ++i)
      for (int64_t j = 0; j < width; ++j) c[i * ldc + j] = tile[i][j];
}
#undef EMBER_RNN_ROWS
#endif

template <int MR, typename T>
inline void micro(int64_t kc, const T* a, int64_t lda, const T* p, T* c, int64_t ldc, int64_t width, bool accumulate) {
#if defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {
    micro_kernel_avx2<MR>(kc, a, lda, p, c, ldc, width, accumulate);
    return;
  }
#endif
  micro_kernel<MR, T>(kc, a, lda, p, c, ldc, width, accumulate);
}

// C[M, 0:width] (+)= A[M, K] P for one packed panel P [K, kPanel] (64-byte aligned).
template <typename T>
void gemm_panel(int64_t M, int64_t K, const T* a, int64_t lda, const T* panel, T* c, int64_t ldc, int64_t width,
                bool accumulate) {
  const int64_t blocks = (M + kMaxRows - 1) / kMaxRows;
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, K - k0);
    const bool acc = accumulate || k0 > 0;
    int64_t row = 0;
    for (int64_t bi = 0; bi < blocks; ++bi) {
      // rows spread evenly over the blocks, so that no block is left nearly empty
      const int64_t mr = (M - row + (blocks - bi) - 1) / (blocks - bi);
      const T* ab = a + row * lda + k0;
      const T* pb = panel + k0 * kPanel;
      T* cb = c + row * ldc;
      switch (mr) {
        case 1:
          micro<1>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 2:
          micro<2>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 3:
          micro<3>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 4:
          micro<4>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        case 5:
          micro<5>(kc, ab, lda, pb, cb, ldc, width, acc);
          break;
        default:
          micro<6>(kc, ab, lda, pb, cb, ldc, width, acc);
      }
      row += mr;
    }
  }
}

// Packs panel columns [u0, u0 + width) of the K x N operand elem(k, u) into p (zero-padded).
template <typename T, typename Elem>
void pack_panel(int64_t K, int64_t u0, int64_t width, T* p, const Elem& elem) {
  for (int64_t k = 0; k < K; ++k) {
    T* row = p + k * kPanel;
    for (int64_t j = 0; j < kPanel; ++j) row[j] = j < width ? elem(k, u0 + j) : T(0);
  }
}

}  // namespace rnn
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
