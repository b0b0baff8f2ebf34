// The 16-bit convolution's kernel (core/cuda/conv2d.cu; issue 51): the three GEMMs of
// core/cuda/conv_problems.h over bfloat16 (or, kF16, float16) tensors on the tensor cores, float32
// accumulation, each output rounded to its type once (the filter gradient's K-split partial sums stay float32 until the
// slices are added). It reuses the bfloat16 GEMM's block and warp tiles (core/cuda/gemm_bf16_mma.h:
// 128 x 128 outputs, 8 warps of 64 x 32 as mma.sync m16n8k16 tiles fed by ldmatrix, 32-deep K
// slices, multiply_slice) with its operands gathered by the Problems instead of copied as matrices:
//   - A stage K-contiguous (the forward's weights are), B stage N-contiguous (consecutive output
//     positions read consecutive input pixels): a warp's gather of either reads one 64-byte run;
//   - cp.async copies at least 4 bytes, and a gathered element is 2 (its neighbour in shared
//     memory is another k or column, not the next element in global memory), so the next slice
//     is loaded into registers while the current one is multiplied out and stored into the other
//     shared stage after it: two stages, one barrier a slice;
//   - the epilogue regroups two adjacent mma tiles' accumulators by shuffles (put_accumulator_pairs)
//     so that a lane stores four adjacent outputs, 8 bytes, where the output allows it.
// The emulator runs the portable mma/ldmatrix bodies (tests/emu/conv_bf16_mma_emu_test.cpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/cuda/conv_problems.h"
#include "core/cuda/device_api.h"
#include "core/cuda/gemm_bf16_mma.h"
#include "core/cuda/half.h"
#include "core/cuda/mma.h"

namespace ember::cuda::conv {

// The stages and which slice elements a thread gathers: kPerA elements of A at rows a_m + i kStepA
// (one k each), kPerB of B at k rows b_k + i kStepB (one column each).
struct Bf16Gather {
  static constexpr int BM = bf16mma::BM, BN = bf16mma::BN, BK = bf16mma::BK, kThreads = bf16mma::kThreads;
  static constexpr int kPerA = BM * BK / kThreads, kPerB = BN * BK / kThreads;
  static constexpr int kStepA = kThreads / BK, kStepB = kThreads / BN;
  using StageA = bf16mma::Stage<BM, true>;   // BM rows of BK (+ padding)
  using StageB = bf16mma::Stage<BN, false>;  // BK rows of BN (+ padding)
  static_assert(kPerA * kThreads == BM * BK && kPerB * kThreads == BN * BK, "the slice divides among the threads");
};

// C[m, j] = v plus the row's bias (none: v as it is), rounded to bfloat16, or kept float32 where
// the Problem writes float32 (the filter gradient's partial sums).
template <bool kF16, typename Problem>
EMBER_DEVICE void store_bf16(const Problem& p, int g, int split, int m, int j, float v) {
  if (m >= p.M || j >= p.N) return;
  const uint16_t* b = p.bias_of(g, m);
  if (b) v += bf16mma::to_float(kF16, *b);
  auto* o = p.out(g, split, m, j);
  if constexpr (std::is_same_v<std::remove_pointer_t<decltype(o)>, float>)
    *o = v;
  else
    *o = bf16mma::to_bits(kF16, v);
}

// C[m, j .. j + 3], those below N: one 8-byte (bfloat16) or 16-byte (float32 partial sums) store
// where vec_out allows it (the four in one row, aligned: conv_problems.h), else one at a time.
template <bool kF16, typename Problem>
EMBER_DEVICE void store4_bf16(const Problem& p, int g, int split, int m, int j, const float v[4]) {
  if (m >= p.M) return;
  if (p.vec_out && j + 3 < p.N) {
    const uint16_t* b = p.bias_of(g, m);
    const float add = b ? bf16mma::to_float(kF16, *b) : 0.f;
    float w[4];
    for (int q = 0; q < 4; ++q) w[q] = b ? v[q] + add : v[q];  // no bias: the sum as it is (-0 stays)
    auto* o = p.out(g, split, m, j);
    if constexpr (std::is_same_v<std::remove_pointer_t<decltype(o)>, float>) {
      *reinterpret_cast<float4*>(o) = make_float4(w[0], w[1], w[2], w[3]);
    } else {
      *reinterpret_cast<uint2*>(o) = make_uint2(bf16mma::pack2(kF16, w[0], w[1]), bf16mma::pack2(kF16, w[2], w[3]));
    }
    return;
  }
  for (int q = 0; q < 4; ++q) store_bf16<kF16>(p, g, split, m, j + q, v[q]);
}

// Grid as implicit_gemm's (core/cuda/conv2d.cu): x over N tiles, y over M tiles, z over groups x K
// splits. One block an SM, as the bfloat16 GEMM (its accumulators and fragments take ~190 registers).
template <typename Problem, bool kF16>
__global__ void __launch_bounds__(bf16mma::kThreads, 1) implicit_gemm_bf16(Problem p, int splits, int kchunk) {
  using L = Bf16Gather;
  EMBER_SHARED(uint4, As, [2][L::StageA::kElems / 8]);
  EMBER_SHARED(uint4, Bs, [2][L::StageB::kElems / 8]);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm = (warp / bf16mma::kWarpsN) * bf16mma::kWarpM, wn = (warp % bf16mma::kWarpsN) * bf16mma::kWarpN;
  const int g = static_cast<int>(blockIdx.z) / splits, split = static_cast<int>(blockIdx.z) % splits;
  const int m0 = static_cast<int>(blockIdx.y) * L::BM, n0 = static_cast<int>(blockIdx.x) * L::BN;
  const int k_begin = split * kchunk, k_end = p.K - k_begin < kchunk ? p.K : k_begin + kchunk;
  const int tiles = k_begin < k_end ? (k_end - k_begin + L::BK - 1) / L::BK : 0;

  const int a_k = tid % L::BK, a_m = tid / L::BK, b_n = tid % L::BN, b_k = tid / L::BN;
  const bool col_ok = n0 + b_n < p.N;
  const typename Problem::Col cur = p.col(g, col_ok ? n0 + b_n : 0);
  uint16_t ra[L::kPerA], rb[L::kPerB];
  auto fetch = [&](int k0) {
    EMBER_UNROLL
    for (int i = 0; i < L::kPerA; ++i) {
      const int m = m0 + a_m + i * L::kStepA, k = k0 + a_k;
      ra[i] = m < p.M && k < k_end ? *p.a_ptr(g, m, k) : uint16_t{0};
    }
    EMBER_UNROLL
    for (int i = 0; i < L::kPerB; ++i) {
      const int k = k0 + b_k + i * L::kStepB;
      rb[i] = col_ok && k < k_end ? load(p.b_src(cur, k)) : uint16_t{0};
    }
  };
  auto put = [&](int s) {
    uint16_t* SA = reinterpret_cast<uint16_t*>(As[s]);
    uint16_t* SB = reinterpret_cast<uint16_t*>(Bs[s]);
    EMBER_UNROLL
    for (int i = 0; i < L::kPerA; ++i) SA[(a_m + i * L::kStepA) * L::StageA::kStride + a_k] = ra[i];
    EMBER_UNROLL
    for (int i = 0; i < L::kPerB; ++i) SB[(b_k + i * L::kStepB) * L::StageB::kStride + b_n] = rb[i];
  };

  float acc[4][4][4];
  EMBER_UNROLL
  for (int i = 0; i < 4; ++i) EMBER_UNROLL
  for (int j = 0; j < 4; ++j) EMBER_UNROLL
  for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

  if (tiles > 0) {
    fetch(k_begin);
    put(0);
  }
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const bool next = t + 1 < tiles;
    if (next) fetch(k_begin + (t + 1) * L::BK);  // in flight while this slice is multiplied out
    bf16mma::multiply_slice<false, false, kF16>(acc, reinterpret_cast<const uint16_t*>(As[t & 1]),
                                                reinterpret_cast<const uint16_t*>(Bs[t & 1]), wm, wn, lane);
    // The other stage was last read before the previous iteration's barrier: free to overwrite.
    if (next) put((t + 1) & 1);
    __syncthreads();
  }
  EMBER_UNROLL
  for (int i = 0; i < 4; ++i) EMBER_UNROLL
  for (int j = 0; j < 4; j += 2)
    put_accumulator_pairs(m0 + wm + 16 * i, n0 + wn + 8 * j, acc[i][j], acc[i][j + 1],
                          [&](int m, int n, const float* v) { store4_bf16<kF16>(p, g, split, m, n, v); });
}

}  // namespace ember::cuda::conv
