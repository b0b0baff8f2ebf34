// The 16-bit GEMM on the tensor cores (core/cuda/gemm.cu sends gemm_stub's dtype-bfloat16 and
// -float16 calls here; issue 51): C = alpha A B + beta C with A and B bfloat16 (or float16: kF16,
// Bf16GemmParams::f16), float32 accumulation, C of A's type (rounded to nearest even once) or
// float32. The sm_80 design, which Hopper also runs:
//   - a 128 x 128 output tile per block of 8 warps, each warp 64 x 32 of it as 4 x 4 tiles of
//     mma.sync m16n8k16 (core/cuda/mma.h), 64 float accumulators a lane;
//   - 32-deep K slices copied with 16-byte cp.async (8 elements) into two shared stages, the next
//     slice's copies issued before the current one is multiplied out, one barrier a slice;
//   - each operand kept in shared memory as it lies in global memory (K-contiguous rows, or rows
//     of the other dimension), and its fragments read with ldmatrix, transposing (.trans) where
//     the operand's contiguous dimension is not K: no transposing copies;
//   - shared rows padded by 8 elements (16 bytes): the 8 row addresses of an ldmatrix phase then
//     fall in 8 different 16-byte bank groups (row strides of 80 and 272 bytes).
// The portable bodies of mma.sync, ldmatrix and cp.async run in the emulator, which tests every
// transpose and edge in three thread orders (tests/emu/gemm_bf16_mma_emu_test.cpp).
#pragma once

#include <cstdint>

#include "core/cuda/cp_async.h"
#include "core/cuda/device_api.h"
#include "core/cuda/half.h"
#include "core/cuda/mma.h"

namespace ember::cuda {

struct Bf16GemmParams {
  const uint16_t* a;
  const uint16_t* b;
  void* c;  // uint16_t (bfloat16) or float (c_float32)
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t batch;
  int m, n, k;
  int m_on_x;  // row tiles on grid x (core/cuda/gemm_geometry.h)
  float alpha, beta;
  bool c_float32;
  bool f16 = false;  // A, B (and C unless c_float32) float16 instead of bfloat16
};

namespace bf16mma {

// A 16-bit element's value, and a float rounded (to nearest even) to one: bfloat16 or float16.
EMBER_DEVICE float to_float(bool f16, uint16_t v) {
  return f16 ? half_bits_to_float(v) : bf16_bits_to_float(v);
}
EMBER_DEVICE uint16_t to_bits(bool f16, float v) {
  return f16 ? float_to_half_bits(v) : float_to_bf16_bits(v);
}
// Two floats rounded and packed into one 32-bit word, a in the low half (the lower address).
EMBER_DEVICE uint32_t pack2(bool f16, float a, float b) {
  return static_cast<uint32_t>(to_bits(f16, a)) | static_cast<uint32_t>(to_bits(f16, b)) << 16;
}

constexpr int BM = 128, BN = 128, BK = 32, kThreads = 256, kPad = 8;
constexpr int kWarpM = 64, kWarpN = 32, kWarpsN = 4;

// One operand's slice in shared memory, as it lies in global memory: kKContig, rows of the tile
// (BM or BN) by BK; else BK rows by the tile's width. Its row stride, in elements.
template <int kRows, bool kKContig>
struct Stage {
  static constexpr int kStride = kKContig ? BK + kPad : kRows + kPad;
  static constexpr int kElems = kKContig ? kRows * kStride : BK * kStride;
  // Issues the cp.async copies of the slice at k0 of X (tile starting at row r0; rows and k the
  // operand's extents): 16-byte chunks of 8 elements along the contiguous dimension, zero-filled
  // past the edge, two per thread.
  EMBER_DEVICE static void copy(uint16_t* S, const uint16_t* X, int64_t ld, int r0, int k0, int rows, int k, int tid) {
    constexpr int kChunksPerRow = kKContig ? BK / 8 : kRows / 8;
    constexpr int kChunks = kRows * BK / 8;
    EMBER_UNROLL
    for (int c = tid; c < kChunks; c += kThreads) {
      const int row = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
      const int r = kKContig ? r0 + row : r0 + col, kk = kKContig ? k0 + col : k0 + row;
      const int along = kKContig ? kk : r, extent = kKContig ? k : rows;
      const bool line = kKContig ? r < rows : kk < k;
      const int left = extent - along, valid = !line || left <= 0 ? 0 : left < 8 ? left : 8;
      const uint16_t* src = X + (kKContig ? static_cast<int64_t>(r) * ld + kk : static_cast<int64_t>(kk) * ld + r);
      cp_async_16(S + row * kStride + col, valid > 0 ? src : X, 2 * valid);
    }
  }
};

// A's fragments for the warp's 16-row tile at (m, kk) of the stage: ldmatrix.x4, lane l giving
// row l % 16 (k half l / 16) of a K-contiguous stage, or k row (l % 8) + 8 (l / 16), column half
// (l / 8) % 2 of an M-contiguous one.
template <bool kKContig>
EMBER_DEVICE void load_a(uint32_t f[4], const uint16_t* S, int m, int kk, int lane) {
  using St = Stage<BM, kKContig>;
  if constexpr (kKContig)
    ldmatrix_x4<false>(f, S + (m + lane % 16) * St::kStride + kk + (lane / 16) * 8);
  else
    ldmatrix_x4<true>(f, S + (kk + lane % 8 + (lane / 16) * 8) * St::kStride + m + ((lane / 8) % 2) * 8);
}

// B's fragments for two 8-column tiles at (n, kk): f[0], f[1] for columns n .. n + 7 (k halves),
// f[2], f[3] for n + 8 .. n + 15.
template <bool kKContig>
EMBER_DEVICE void load_b(uint32_t f[4], const uint16_t* S, int n, int kk, int lane) {
  using St = Stage<BN, kKContig>;
  if constexpr (kKContig)
    ldmatrix_x4<false>(f, S + (n + (lane / 16) * 8 + lane % 8) * St::kStride + kk + ((lane / 8) % 2) * 8);
  else
    ldmatrix_x4<true>(f, S + (kk + lane % 8 + ((lane / 8) % 2) * 8) * St::kStride + n + (lane / 16) * 8);
}

// acc += the stage's slice: per 16-deep step, 2 B and 4 A ldmatrix.x4 and 16 mma, each A fragment
// loaded just before its 4 mma (holding all four at once spilled at the 128-register cap).
template <bool TA, bool TB, bool kF16>
EMBER_DEVICE void multiply_slice(float (&acc)[4][4][4], const uint16_t* SA, const uint16_t* SB, int wm, int wn,
                                 int lane) {
  EMBER_UNROLL
  for (int kk = 0; kk < BK; kk += 16) {
    uint32_t bf[4][2];
    EMBER_UNROLL
    for (int j = 0; j < 4; j += 2) {
      uint32_t f[4];
      load_b<TB>(f, SB, wn + 8 * j, kk, lane);
      bf[j][0] = f[0], bf[j][1] = f[1], bf[j + 1][0] = f[2], bf[j + 1][1] = f[3];
    }
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) {
      uint32_t af[4];
      load_a<!TA>(af, SA, wm + 16 * i, kk, lane);
      EMBER_UNROLL
      for (int j = 0; j < 4; ++j) mma_m16n8k16<kF16>(acc[i][j], af, bf[j], acc[i][j]);
    }
  }
}

EMBER_DEVICE void store_one(const Bf16GemmParams& p, void* C, int m, int n, float v) {
  if (m >= p.m || n >= p.n) return;
  const int64_t o = static_cast<int64_t>(m) * p.ldc + n;
  if (p.c_float32) {
    float* out = static_cast<float*>(C) + o;
    *out = p.beta == 0.f ? p.alpha * v : p.alpha * v + p.beta * *out;
  } else {
    uint16_t* out = static_cast<uint16_t*>(C) + o;
    const float r = p.beta == 0.f ? p.alpha * v : p.alpha * v + p.beta * to_float(p.f16, *out);
    *out = to_bits(p.f16, r);
  }
}

// C[m, n .. n + 3], those inside C: one 8-byte (bfloat16) or 16-byte (float32) store when the four
// lie in C with beta 0 and the row start aligned for it, else one element at a time.
EMBER_DEVICE void store_four(const Bf16GemmParams& p, void* C, int m, int n, const float v[4]) {
  if (m >= p.m) return;
  const int64_t o = static_cast<int64_t>(m) * p.ldc + n;
  if (p.beta == 0.f && n + 3 < p.n && p.ldc % 4 == 0) {
    if (p.c_float32 && reinterpret_cast<uintptr_t>(C) % 16 == 0) {
      *reinterpret_cast<float4*>(static_cast<float*>(C) + o) =
          make_float4(p.alpha * v[0], p.alpha * v[1], p.alpha * v[2], p.alpha * v[3]);
      return;
    }
    if (!p.c_float32 && reinterpret_cast<uintptr_t>(C) % 8 == 0) {
      *reinterpret_cast<uint2*>(static_cast<uint16_t*>(C) + o) =
          make_uint2(pack2(p.f16, p.alpha * v[0], p.alpha * v[1]), pack2(p.f16, p.alpha * v[2], p.alpha * v[3]));
      return;
    }
  }
  for (int q = 0; q < 4; ++q) store_one(p, C, m, n + q, v[q]);
}

}  // namespace bf16mma

// Requires (host-checked): A and B 16-byte aligned, lda, ldb and their batch strides multiples of 8
// elements. Grid as the float GEMM's: row tiles on x or y (p.m_on_x), batch entries on z.
template <bool TA, bool TB, bool kF16>
__global__ void __launch_bounds__(bf16mma::kThreads, 1) gemm_bf16_mma(Bf16GemmParams p) {
  using namespace bf16mma;
  using SA_ = Stage<BM, !TA>;
  using SB_ = Stage<BN, TB>;
  EMBER_SHARED(uint4, As, [2][SA_::kElems / 8]);
  EMBER_SHARED(uint4, Bs, [2][SB_::kElems / 8]);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm = (warp / kWarpsN) * kWarpM, wn = (warp % kWarpsN) * kWarpN;
  const int m0 = static_cast<int>(p.m_on_x ? blockIdx.x : blockIdx.y) * BM;
  const int n0 = static_cast<int>(p.m_on_x ? blockIdx.y : blockIdx.x) * BN;
  const int tiles = (p.k + BK - 1) / BK;

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const uint16_t* A = p.a + z * p.stride_a;
    const uint16_t* B = p.b + z * p.stride_b;
    void* C = p.c_float32 ? static_cast<void*>(static_cast<float*>(p.c) + z * p.stride_c)
                          : static_cast<void*>(static_cast<uint16_t*>(p.c) + z * p.stride_c);
    float acc[4][4][4];
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) EMBER_UNROLL
    for (int j = 0; j < 4; ++j) EMBER_UNROLL
    for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

    auto issue = [&](int stage, int k0) {
      SA_::copy(reinterpret_cast<uint16_t*>(As[stage]), A, p.lda, m0, k0, p.m, p.k, tid);
      SB_::copy(reinterpret_cast<uint16_t*>(Bs[stage]), B, p.ldb, n0, k0, p.n, p.k, tid);
      cp_async_commit();
    };
    if (tiles > 0) issue(0, 0);
    cp_async_wait_all();
    __syncthreads();
    for (int s = 0; s < tiles; ++s) {
      // The other stage was last read before the previous iteration's barrier: free to overwrite.
      if (s + 1 < tiles) issue((s + 1) & 1, (s + 1) * BK);
      multiply_slice<TA, TB, kF16>(acc, reinterpret_cast<const uint16_t*>(As[s & 1]),
                                   reinterpret_cast<const uint16_t*>(Bs[s & 1]), wm, wn, lane);
      cp_async_wait_all();
      __syncthreads();
    }
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) EMBER_UNROLL
    for (int j = 0; j < 4; j += 2)
      put_accumulator_pairs(m0 + wm + 16 * i, n0 + wn + 8 * j, acc[i][j], acc[i][j + 1],
                            [&](int m, int n, const float* v) { store_four(p, C, m, n, v); });
  }
}

// The fallback for operands the tensor-core kernel cannot take (unaligned, leading dimensions not a
// multiple of 8): one thread an element of C, the same float32 accumulation.
template <bool TA, bool TB>
__global__ void gemm_bf16_scalar(Bf16GemmParams p) {
  const int64_t per = static_cast<int64_t>(p.m) * p.n, total = per * p.batch;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const int64_t z = e / per, r = e - z * per;
    const int m = static_cast<int>(r / p.n), n = static_cast<int>(r - static_cast<int64_t>(m) * p.n);
    const uint16_t* A = p.a + z * p.stride_a;
    const uint16_t* B = p.b + z * p.stride_b;
    float acc = 0.f;
    for (int k = 0; k < p.k; ++k) {
      const uint16_t x = TA ? A[static_cast<int64_t>(k) * p.lda + m] : A[static_cast<int64_t>(m) * p.lda + k];
      const uint16_t y = TB ? B[static_cast<int64_t>(n) * p.ldb + k] : B[static_cast<int64_t>(k) * p.ldb + n];
      acc = fmaf(bf16mma::to_float(p.f16, x), bf16mma::to_float(p.f16, y), acc);
    }
    void* C = p.c_float32 ? static_cast<void*>(static_cast<float*>(p.c) + z * p.stride_c)
                          : static_cast<void*>(static_cast<uint16_t*>(p.c) + z * p.stride_c);
    bf16mma::store_one(p, C, m, n, acc);
  }
}

}  // namespace ember::cuda
