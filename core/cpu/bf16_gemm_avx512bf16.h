// The AVX512-BF16 code of core/cpu/bf16_gemm.cpp (included there at the avx512bf16 level only).
//
// vdpbf16ps takes, in each 32-bit lane, a pair of bfloat16 values from each source and adds both
// products to that lane's float32 accumulator. So both operands are packed as pairs along k:
//   A micro-panel (kMR rows):    for each k pair p, kMR 32-bit words (A[i][2p], A[i][2p+1])
//   B micro-panel (kNR columns): for each k pair p, kNR 32-bit words (B[2p][j], B[2p+1][j])
// (an odd k gets a zero partner). The micro-kernel keeps a kMR x kNR float32 tile of C in 24
// zmm registers; per k pair it loads two B vectors and, for each row, broadcasts A's pair from
// memory into two vdpbf16ps. The blocking is the usual one (BLIS's loop order): a kKC-deep slice
// of B (kNC columns) is packed once and reused by every row block; a kMC x kKC block of A is
// packed per row block and stays in L2 while the B micro-panels stream from L1.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/cpu/capability.h"
#include "core/gemm_kernels.h"
#include "core/half_bits.h"
#include "core/parallel.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {
namespace bf16x {

constexpr int kMR = 12;        // rows of a C tile: 12 x 2 accumulators, 2 B vectors, 32 zmm in all
constexpr int kNR = 32;        // columns of a C tile: two zmm of 16 floats
constexpr int64_t kKC = 384;   // k per block: a B micro-panel of 192 pairs x 32 words is 24 KB, in L1
constexpr int64_t kMC = 96;    // rows per packed A block: 96 x 384 x 2 B = 72 KB, in L2
constexpr int64_t kNC = 1536;  // columns per packed B slice: 384 x 1536 x 2 B = 1.2 MB

// An operand as stored, bfloat16 (E = uint16_t) or float32 rounded to bfloat16 as it is packed
// (E = float): element (r, c) of op(X) is p[r * ld + c], or p[c * ld + r] when trans.
template <typename E>
struct Operand {
  const E* p;
  int64_t ld;
  bool trans;
  // The operand from row r (when rows index op(X)'s first dimension) on.
  Operand rows_from(int64_t r) const { return {trans ? p + r : p + r * ld, ld, trans}; }
  Operand cols_from(int64_t c) const { return {trans ? p + c * ld : p + c, ld, trans}; }
};

// 16 elements (fewer where `mask` says; 0 past it) widened to 32-bit words holding their bfloat16
// bits. From float32, vcvtneps2bf16 rounds to nearest even and flushes subnormal inputs to zero,
// which changes no product: vdpbf16ps reads subnormal bfloat16 as zero anyway.
// (The maskz forms of the widening and the shift: GCC 12 warns that the plain ones' undefined
// pass-through operand "may be used uninitialized", its bug 105593.)
inline __m512i load_bf16_words(const uint16_t* p, __mmask16 mask) {
  return _mm512_maskz_cvtepu16_epi32(mask, _mm256_maskz_loadu_epi16(mask, p));
}
inline __m512i load_bf16_words(const float* p, __mmask16 mask) {
  return _mm512_maskz_cvtepu16_epi32(mask, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, p)));
}

// The pairs (x(k0 + 2p, .), x(k0 + 2p + 1, .)) of a row of op(X) contiguous along k: kc elements
// at `row`, pair p to dst[p * W].
template <int W>
void pack_row_pairs(const uint16_t* row, int64_t kc, uint32_t* dst) {
  for (int64_t p = 0; p < kc / 2; ++p) std::memcpy(&dst[p * W], row + 2 * p, 4);
  if (kc & 1) dst[(kc / 2) * W] = row[kc - 1];
}
template <int W>
void pack_row_pairs(const float* row, int64_t kc, uint32_t* dst) {
  int64_t p = 0;
  alignas(64) uint32_t pairs[16];
  for (; 2 * p + 32 <= kc; p += 16) {  // 32 floats -> 16 pairs, vcvtne2ps2bf16 keeps their order
    const __m512 lo = _mm512_loadu_ps(row + 2 * p), hi = _mm512_loadu_ps(row + 2 * p + 16);
    _mm512_store_si512(pairs, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    for (int q = 0; q < 16; ++q) dst[(p + q) * W] = pairs[q];
  }
  for (; 2 * p + 1 < kc; ++p)
    dst[p * W] = float_to_bf16_bits(row[2 * p]) | static_cast<uint32_t>(float_to_bf16_bits(row[2 * p + 1])) << 16;
  if (kc & 1) dst[p * W] = float_to_bf16_bits(row[kc - 1]);
}

// dst[p * W + w] = (x(w, k0 + 2p), x(w, k0 + 2p + 1)) for w < width, 0 for width <= w < W, where
// x(w, k) is op(A)(w, k) (by_rows) or op(B)(k, w). Two layouts are contiguous along the packed
// direction: pairs along k in one stored row (A not transposed, B transposed), or two stored rows
// to interleave, 16 columns at a time (the other two cases).
template <int W, typename E>
void pack(const Operand<E>& x, bool by_rows, int64_t k0, int64_t kc, int64_t width, uint32_t* dst) {
  static_assert(W <= 32, "W: at most two 16-lane chunks per pair of rows");
  const int64_t kp = (kc + 1) / 2;
  if (by_rows != x.trans) {
    for (int64_t w = 0; w < W; ++w) {
      if (w < width) {
        pack_row_pairs<W>(x.p + w * x.ld + k0, kc, dst + w);
      } else {
        for (int64_t p = 0; p < kp; ++p) dst[p * W + w] = 0;
      }
    }
    return;
  }
  for (int64_t p = 0; p < kp; ++p) {
    const E* r0 = x.p + (k0 + 2 * p) * x.ld;
    const bool has_r1 = 2 * p + 1 < kc;
    for (int64_t w = 0; w < W; w += 16) {
      const int64_t live = std::clamp<int64_t>(width - w, 0, 16), span = std::min<int64_t>(W - w, 16);
      const __mmask16 load = static_cast<__mmask16>((1u << live) - 1), store = static_cast<__mmask16>((1u << span) - 1);
      const __m512i lo = load_bf16_words(r0 + w, load);
      const __m512i hi =
          has_r1 ? _mm512_maskz_slli_epi32(load, load_bf16_words(r0 + x.ld + w, load), 16) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(dst + p * W + w, store, _mm512_or_si512(lo, hi));
    }
  }
}

// C[0:mr, 0:nr] = alpha * A B + (first ? beta * C : C), A and B packed micro-panels of kp pairs.
// beta 0 at the first block ignores C's old contents.
inline void micro_kernel(int64_t kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int mr, int nr,
                         float alpha, float beta, bool first) {
  __m512 acc[kMR][2];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p) {
    const __m512i b0 = _mm512_loadu_si512(b + p * kNR), b1 = _mm512_loadu_si512(b + p * kNR + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512i av = _mm512_set1_epi32(static_cast<int>(a[p * kMR + i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], (__m512bh)av, (__m512bh)b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], (__m512bh)av, (__m512bh)b1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xffff : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : static_cast<__mmask16>((1u << (nr - 16)) - 1);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(first ? beta : 1.0f);
  const bool read_c = !first || beta != 0.0f;
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    __m512 r0 = _mm512_mul_ps(va, acc[i][0]), r1 = _mm512_mul_ps(va, acc[i][1]);
    if (read_c) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), r1);
    }
    _mm512_mask_storeu_ps(row, m0, r0);
    _mm512_mask_storeu_ps(row + 16, m1, r1);
  }
}

// A packing buffer of one thread. Not a std::vector: its template code, instantiated here with
// AVX-512 instructions, would be a weak symbol the baseline copy of this file lacks
// (tests/scripts/check_cpu_dispatch_symbols.sh), which the linker could keep for baseline callers.
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { delete[] p_; }
  uint32_t* reserve(int64_t n) {
    if (n > n_) {
      delete[] p_;
      p_ = new uint32_t[static_cast<size_t>(n)];
      n_ = n;
    }
    return p_;
  }
  uint32_t& operator[](int64_t i) { return p_[i]; }

 private:
  uint32_t* p_ = nullptr;
  int64_t n_ = 0;
};

struct Buffers {
  PackBuffer a, b;
};

// C[0:m, 0:n] (ldc) = alpha op(A) op(B) + beta C on one thread, A and B as in `g`.
template <typename E>
void gemm_serial(const Operand<E>& a, const Operand<E>& b, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                 float* c, int64_t ldc, Buffers& buf) {
  const int64_t kc_max = std::min(k, kKC), kp_max = (kc_max + 1) / 2;
  buf.a.reserve(kp_max * ((std::min(m, kMC) + kMR - 1) / kMR) * kMR);
  buf.b.reserve(kp_max * ((std::min(n, kNC) + kNR - 1) / kNR) * kNR);
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc), kp = (kc + 1) / 2;
      for (int64_t jr = 0; jr < nc; jr += kNR)
        pack<kNR>(b.cols_from(jc + jr), false, pc, kc, std::min<int64_t>(kNR, nc - jr), &buf.b[jr * kp]);
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        for (int64_t ir = 0; ir < mc; ir += kMR)
          pack<kMR>(a.rows_from(ic + ir), true, pc, kc, std::min<int64_t>(kMR, mc - ir), &buf.a[ir * kp]);
        for (int64_t jr = 0; jr < nc; jr += kNR)
          for (int64_t ir = 0; ir < mc; ir += kMR)
            micro_kernel(kp, &buf.a[ir * kp], &buf.b[jr * kp], c + (ic + ir) * ldc + jc + jr, ldc,
                         static_cast<int>(std::min<int64_t>(kMR, mc - ir)),
                         static_cast<int>(std::min<int64_t>(kNR, nc - jr)), alpha, beta, pc == 0);
      }
    }
  }
}

// Below this many multiply-adds one thread does the whole product.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

// C (float32, ldc) = alpha op(A) op(B) + beta C for g's A and B (E: bfloat16, or float32 rounded as packed), split
// across threads by columns of C (whole kNR panels) or, when C is too narrow for that, by rows (whole kMR tiles).
template <typename E>
void gemm(const GemmArgs& g, float* c, int64_t ldc) {
  const Operand<E> a{static_cast<const E*>(g.a), g.lda, g.trans_a};
  const Operand<E> b{static_cast<const E*>(g.b), g.ldb, g.trans_b};
  const float alpha = static_cast<float>(g.alpha), beta = static_cast<float>(g.beta);
  const int64_t col_tiles = (g.n + kNR - 1) / kNR, row_tiles = (g.m + kMR - 1) / kMR;
  const int threads = g.m * g.n * g.k < kParallelMacs ? 1 : threads_here();
  const bool by_cols = col_tiles >= 2 * threads || col_tiles >= row_tiles;
  const int64_t tiles = by_cols ? col_tiles : row_tiles;
  parallel_slots(tiles, threads, [&](int, int64_t t0, int64_t t1) {
    // Kept per thread: B's packed slice reaches a megabyte, which a fresh allocation per GEMM would
    // map and fault in again every call.
    thread_local Buffers buf;
    if (by_cols) {
      const int64_t j0 = t0 * kNR, j1 = std::min(g.n, t1 * kNR);
      gemm_serial(a, b.cols_from(j0), g.m, j1 - j0, g.k, alpha, beta, c + j0, ldc, buf);
    } else {
      const int64_t i0 = t0 * kMR, i1 = std::min(g.m, t1 * kMR);
      gemm_serial(a.rows_from(i0), b, i1 - i0, g.n, g.k, alpha, beta, c + i0 * ldc, ldc, buf);
    }
  });
}

}  // namespace bf16x
}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
