// A register-blocked GEMM over pre-packed panels of B, for products a BLAS call would make slow by
// repacking B at every call: the recurrent layers' per-step products (core/cpu/rnn_kernel.cpp:
// h_{t-1} W_hh^T in forward and dG_t W_hh in backward, small in the batch dimension, W_hh packed
// once per call) and the convolutions' per-chunk products (core/cpu/conv_kernel.cpp: the filters,
// or their Winograd transform, packed once per call; the patch rows, transformed tiles or output
// gradient read in place). B is packed into panels of kPanel columns; A is read where it lies, row
// by row (kRows: element (i, k) at a[i * lda + k]) or column by column (kColumns: at
// a[k * lda + i], an operand stored transposed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/cpu/capability.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace panel {

// A panel: K rows of kPanel contiguous values (zero-padded past the operand's last column),
// 64-byte aligned: two of the level's float vectors a row, so that the vector kernels below load
// B twice per k for two FMAs a row (one 16-float vector a row read A broadcasts and B at one FMA
// each, and ran 10-20% below OpenBLAS's SkylakeX kernels on a Zen 5 VM; two a row level or above).
#if defined(__AVX512F__)
constexpr int64_t kPanel = 32;
constexpr int kMaxRows = 12;  // rows per register block: 24 accumulators of 16 floats
#else
constexpr int64_t kPanel = 16;
constexpr int kMaxRows = 6;  // rows per register block: 12 accumulators of 8 floats
#endif
// A panel's K-block (16 or 32 KB of floats) stays in L1 across row blocks. 32 KB at avx512 was
// measured on Zen 5 (48 KB of L1) and Zen 4 (32 KB): 128-deep blocks were no better on either.
constexpr int64_t kBlockK = 256;

// Where A's element (i, k) lies: row by row, or column by column (A^T stored row by row).
enum class ALayout { kRows, kColumns };

template <ALayout L, typename T>
inline const T* a_at(const T* a, int64_t lda, int64_t i, int64_t k) {
  return L == ALayout::kRows ? a + i * lda + k : a + k * lda + i;
}

// Whether this level's float kernel is a vector one as wide as the level's vectors (AVX2/FMA's 8
// floats at avx2, AVX-512's 16 at avx512): then callers that could use BLAS instead take it where
// repacking B at every BLAS call would cost more (gemm_kernel.cpp, conv_kernel.cpp). At baseline
// the portable kernel is slower than BLAS and they do not. The avx2 choice was measured on Zen 3,
// the avx512 one on Zen 5 and Zen 4 (steps level or faster there): not on Intel CPUs, whose caches differ.
#if defined(__AVX2__) && defined(__FMA__)
constexpr bool kVectorFloatKernel = true;
#else
constexpr bool kVectorFloatKernel = false;
#endif

// C[0:MR, 0:width] (+)= A[0:MR, 0:kc] P[0:kc, 0:kPanel]; the portable version. When accumulating,
// the block's products are summed from zero and then added to C, as BLAS does with beta = 1: a
// sum carried through C from block to block (a weight gradient over many chunks of images) adds
// each small product to a large total, and lost 0.1% in an op-table row that way.
template <int MR, ALayout L, typename T>
inline void micro_kernel(int64_t kc, const T* a, int64_t lda, const T* p, T* c, int64_t ldc, int64_t width,
                         bool accumulate) {
  T acc[MR][kPanel] = {};
  for (int64_t k = 0; k < kc; ++k) {
    const T* pk = p + k * kPanel;
    for (int i = 0; i < MR; ++i) {
      const T av = *a_at<L>(a, lda, i, k);
      for (int64_t j = 0; j < kPanel; ++j) acc[i][j] += av * pk[j];
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < width; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
// float with AVX2/FMA: two 8-float accumulators per row, the A value broadcast from memory. The
// accumulators are named variables (not arrays) so that they live in registers.
#define EMBER_PANEL_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int MR, ALayout L>
inline void micro_kernel_avx2(int64_t kc, const float* a, int64_t lda, const float* p, float* c, int64_t ldc,
                              int64_t width, bool accumulate) {
  static_assert(MR >= 1 && MR <= kMaxRows);
  alignas(32) float tile[kMaxRows][kPanel];
  const bool full = width == kPanel;
#define EMBER_PANEL_DECL(i) __m256 lo##i = _mm256_setzero_ps(), hi##i = _mm256_setzero_ps();
  EMBER_PANEL_ROWS(EMBER_PANEL_DECL)
#undef EMBER_PANEL_DECL
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(p + k * kPanel), b1 = _mm256_load_ps(p + k * kPanel + 8);
#define EMBER_PANEL_FMA(i)                                        \
  if constexpr (MR > i) {                                         \
    const __m256 av = _mm256_broadcast_ss(a_at<L>(a, lda, i, k)); \
    lo##i = _mm256_fmadd_ps(av, b0, lo##i);                       \
    hi##i = _mm256_fmadd_ps(av, b1, hi##i);                       \
  }
    EMBER_PANEL_ROWS(EMBER_PANEL_FMA)
#undef EMBER_PANEL_FMA
  }
  // C is added after the block's sum, as in the portable kernel (and why there).
#define EMBER_PANEL_STORE(i)                                  \
  if constexpr (MR > i) {                                     \
    float* dst = full ? c + i * ldc : tile[i];                \
    if (full && accumulate) {                                 \
      lo##i = _mm256_add_ps(_mm256_loadu_ps(dst), lo##i);     \
      hi##i = _mm256_add_ps(_mm256_loadu_ps(dst + 8), hi##i); \
    }                                                         \
    _mm256_storeu_ps(dst, lo##i);                             \
    _mm256_storeu_ps(dst + 8, hi##i);                         \
  }
  EMBER_PANEL_ROWS(EMBER_PANEL_STORE)
#undef EMBER_PANEL_STORE
  if (!full)
    for (int i = 0; i < MR; ++i)
      for (int64_t j = 0; j < width; ++j) c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i][j] : tile[i][j];
}
#undef EMBER_PANEL_ROWS
#endif

#if defined(__AVX512F__)
// float with AVX-512: two 16-float accumulators per row (a whole panel row), the A value broadcast
// once for both; a partial panel's columns are loaded and stored through masks.
#define EMBER_PANEL_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
template <int MR, ALayout L>
inline void micro_kernel_avx512(int64_t kc, const float* a, int64_t lda, const float* p, float* c, int64_t ldc,
                                int64_t width, bool accumulate) {
  static_assert(MR >= 1 && MR <= kMaxRows && kPanel == 32);
  const __mmask16 m0 = width >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << width) - 1);
  const __mmask16 m1 = width <= 16 ? __mmask16(0) : static_cast<__mmask16>((1u << (width - 16)) - 1);
#define EMBER_PANEL_DECL(i) __m512 lo##i = _mm512_setzero_ps(), hi##i = _mm512_setzero_ps();
  EMBER_PANEL_ROWS(EMBER_PANEL_DECL)
#undef EMBER_PANEL_DECL
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(p + k * kPanel), b1 = _mm512_load_ps(p + k * kPanel + 16);
#define EMBER_PANEL_FMA(i)                                    \
  if constexpr (MR > i) {                                     \
    const __m512 av = _mm512_set1_ps(*a_at<L>(a, lda, i, k)); \
    lo##i = _mm512_fmadd_ps(av, b0, lo##i);                   \
    hi##i = _mm512_fmadd_ps(av, b1, hi##i);                   \
  }
    EMBER_PANEL_ROWS(EMBER_PANEL_FMA)
#undef EMBER_PANEL_FMA
  }
  // C is added after the block's sum, as in the portable kernel (and why there).
#define EMBER_PANEL_STORE(i)                                             \
  if constexpr (MR > i) {                                                \
    float* dst = c + i * ldc;                                            \
    if (accumulate) {                                                    \
      lo##i = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, dst), lo##i);      \
      hi##i = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, dst + 16), hi##i); \
    }                                                                    \
    _mm512_mask_storeu_ps(dst, m0, lo##i);                               \
    _mm512_mask_storeu_ps(dst + 16, m1, hi##i);                          \
  }
  EMBER_PANEL_ROWS(EMBER_PANEL_STORE)
#undef EMBER_PANEL_STORE
}
#undef EMBER_PANEL_ROWS
#endif

template <int MR, ALayout L, typename T>
inline void micro(int64_t kc, const T* a, int64_t lda, const T* p, T* c, int64_t ldc, int64_t width, bool accumulate) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    micro_kernel_avx512<MR, L>(kc, a, lda, p, c, ldc, width, accumulate);
    return;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if constexpr (std::is_same_v<T, float>) {
    micro_kernel_avx2<MR, L>(kc, a, lda, p, c, ldc, width, accumulate);
    return;
  }
#endif
  micro_kernel<MR, L, T>(kc, a, lda, p, c, ldc, width, accumulate);
}

// The register block of each height: kFns[mr - 1] runs mr rows. A plain array in this level's
// namespace, not a std::array, whose members a level could define alone (kMaxRows differs).
template <ALayout L, typename T, typename Rows>
struct MicroTable;
template <ALayout L, typename T, int... I>
struct MicroTable<L, T, std::integer_sequence<int, I...>> {
  using Fn = void (*)(int64_t, const T*, int64_t, const T*, T*, int64_t, int64_t, bool);
  static constexpr Fn kFns[sizeof...(I)] = {&micro<I + 1, L, T>...};
};

// C[M, 0:width] (+)= A[M, K] P for one packed panel P [K, kPanel] (64-byte aligned).
template <typename T, ALayout L = ALayout::kRows>
void gemm_panel(int64_t M, int64_t K, const T* a, int64_t lda, const T* panel, T* c, int64_t ldc, int64_t width,
                bool accumulate) {
  using Micro = MicroTable<L, T, std::make_integer_sequence<int, kMaxRows>>;
  const int64_t blocks = (M + kMaxRows - 1) / kMaxRows;
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, K - k0);
    const bool acc = accumulate || k0 > 0;
    int64_t row = 0;
    for (int64_t bi = 0; bi < blocks; ++bi) {
      // rows spread evenly over the blocks, so that no block is left nearly empty
      const int64_t mr = (M - row + (blocks - bi) - 1) / (blocks - bi);
      Micro::kFns[mr - 1](kc, a_at<L>(a, lda, row, k0), lda, panel + k0 * kPanel, c + row * ldc, ldc, width, acc);
      row += mr;
    }
  }
}

// Packs panel columns [u0, u0 + width) of the K x N operand elem(k, u) into p (zero-padded).
template <typename T, typename Elem>
void pack_panel(int64_t K, int64_t u0, int64_t width, T* p, const Elem& elem) {
  for (int64_t k = 0; k < K; ++k) {
    T* row = p + k * kPanel;
    for (int64_t j = 0; j < width; ++j) row[j] = elem(k, u0 + j);
    for (int64_t j = width; j < kPanel; ++j) row[j] = T(0);
  }
}

// The number of panels of an operand N columns wide.
inline int64_t panel_count(int64_t N) {
  return (N + kPanel - 1) / kPanel;
}

// A whole operand B [K, N] as ceil(N / kPanel) panels one after another: packed_size values.
inline int64_t packed_size(int64_t K, int64_t N) {
  return panel_count(N) * K * kPanel;
}

// Panels [q0, q1) of the K x N operand elem(k, n), packed where pack() puts them: panel q starts
// after q panels of K * kPanel. Callers that spread the panels across threads call it per range.
template <typename T, typename Elem>
void pack_panels(int64_t K, int64_t N, int64_t q0, int64_t q1, T* p, const Elem& elem) {
  for (int64_t q = q0; q < q1; ++q)
    pack_panel<T>(K, q * kPanel, std::min(kPanel, N - q * kPanel), p + q * kPanel * K, elem);
}

// Packs the whole K x N operand elem(k, n) into p (64-byte aligned, packed_size(K, N) values).
template <typename T, typename Elem>
void pack(int64_t K, int64_t N, T* p, const Elem& elem) {
  pack_panels<T>(K, N, 0, panel_count(N), p, elem);
}

// C [M, N] (+)= A [M, K] B, B as pack() left it; A read as L says. K is taken in kBlockK-deep
// blocks, and within one the rows in blocks of kBlockABytes of A, which every panel then reads
// from L2 while the panel's block stays in L1 across the rows.
constexpr int64_t kBlockABytes = int64_t{192} << 10;
template <ALayout L, typename T>
void gemm_packed(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* packed, T* c, int64_t ldc,
                 bool accumulate) {
  const int64_t mb = std::max<int64_t>(kMaxRows, kBlockABytes / (kBlockK * int64_t{sizeof(T)}));
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kc = std::min(kBlockK, K - k0);
    for (int64_t m0 = 0; m0 < M; m0 += mb)
      for (int64_t u0 = 0; u0 < N; u0 += kPanel)
        gemm_panel<T, L>(std::min(mb, M - m0), kc, a_at<L>(a, lda, m0, k0), lda, packed + u0 * K + k0 * kPanel,
                         c + m0 * ldc + u0, ldc, std::min(kPanel, N - u0), accumulate || k0 > 0);
  }
}

}  // namespace panel
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
