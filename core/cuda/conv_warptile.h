// The float convolution's kernel (core/cuda/conv2d.cu; issue 50): an implicit GEMM on the float
// GEMM's tiles (core/cuda/sgemm_warptile.h: WarpTile's BM x BN x 8 block tile, 64 x 32 warp tiles,
// 8 x 8 accumulators a lane read from shared memory with 16-byte loads, multiply_slice), with the
// operands gathered from the tensors by the three Problems of core/cuda/conv_problems.h instead of
// read as matrices:
//   - every element of a slice is its own 4-byte cp.async (core/cuda/cp_async.h) from where the
//     Problem says it is straight into the k-major shared stage (zero-filled for padding and
//     a stride's gaps): no register holds a load, so the next slice's copies are issued before
//     the current one is multiplied out and overlap it, in two stages with one barrier a slice;
//   - the loaders walk the contiguous dimension across a warp's lanes: A by BK consecutive k of
//     each row (the weights' K is contiguous in the forward), B by consecutive GEMM columns
//     (output positions, whose input pixels are consecutive along a row); each B column is
//     decoded once per thread (Problem::col);
//   - shared rows padded by 4 floats, as the GEMM's: an A store of a warp (8 k x 4 rows) and a B
//     store (32 columns of one k) each land in 32 banks;
//   - the epilogue stores 4 adjacent outputs with one 16-byte store where the output allows it.
// The grid is implicit_gemm's: x over N tiles, y over M tiles, z over groups x K splits.
#pragma once

#include "core/cuda/conv_problems.h"
#include "core/cuda/cp_async.h"
#include "core/cuda/device_api.h"
#include "core/cuda/sgemm_warptile.h"

namespace ember::cuda::conv {

// The slice of A (BM rows x BK) and of B (BK x BN columns) a thread copies: kPerA and kPerB
// elements, at rows/columns spaced kThreads / BK and k rows spaced kThreads / BN.
template <typename Cfg>
struct GatherLayout {
  static constexpr int kPerA = Cfg::BM * Cfg::BK / Cfg::kThreads, kPerB = Cfg::BN * Cfg::BK / Cfg::kThreads;
  static constexpr int kStepA = Cfg::kThreads / Cfg::BK, kStepB = Cfg::kThreads / Cfg::BN;
  static constexpr int kStrideA = Cfg::BM + Cfg::kPad, kStrideB = Cfg::BN + Cfg::kPad;
  static_assert(Cfg::kThreads % Cfg::BK == 0 && Cfg::kThreads % Cfg::BN == 0, "whole rows and columns per pass");
  static_assert(kPerA * Cfg::kThreads == Cfg::BM * Cfg::BK && kPerB * Cfg::kThreads == Cfg::BN * Cfg::BK,
                "the slice divides evenly among the threads");
};

// Issues the copies of the slice at k0 (K range ending at k_end) into the stage (SA, SB) and
// closes the group. a_m, a_k / b_n, b_k: the thread's first element of each operand.
template <typename Cfg, typename Problem>
EMBER_DEVICE void gather_slice(float* SA, float* SB, const Problem& p, const typename Problem::Col& cur, bool col_ok,
                               int g, int m0, int k0, int k_end, int a_m, int a_k, int b_n, int b_k) {
  using L = GatherLayout<Cfg>;
  const float* any = p.any();
  EMBER_UNROLL
  for (int i = 0; i < L::kPerA; ++i) {
    const int row = a_m + i * L::kStepA, m = m0 + row, k = k0 + a_k;
    const bool ok = m < p.M && k < k_end;
    cp_async_4(SA + a_k * L::kStrideA + row, ok ? p.a_ptr(g, m, k) : any, ok ? 4 : 0);
  }
  EMBER_UNROLL
  for (int i = 0; i < L::kPerB; ++i) {
    const int kr = b_k + i * L::kStepB, k = k0 + kr;
    const Src<float> s = col_ok && k < k_end ? p.b_src(cur, k) : Src<float>{any, false};
    cp_async_4(SB + kr * L::kStrideB + b_n, s.p ? s.p : any, s.ok ? 4 : 0);
  }
  cp_async_commit();
}

// Launch bounds as the GEMM's: 256 threads two blocks an SM (128 registers), 128 threads three.
template <typename Cfg, typename Problem>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks)
    implicit_gemm_warptile(Problem p, int splits, int kchunk) {
  using L = GatherLayout<Cfg>;
  constexpr int BK = Cfg::BK;
  EMBER_SHARED(float4, As, [2][BK * L::kStrideA / 4]);
  EMBER_SHARED(float4, Bs, [2][BK * L::kStrideB / 4]);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm = (warp / Cfg::kWarpsN) * Cfg::kWarpM, wn = (warp % Cfg::kWarpsN) * Cfg::kWarpN;
  const int lm = lane / 4, ln = lane % 4;
  const int g = static_cast<int>(blockIdx.z) / splits, split = static_cast<int>(blockIdx.z) % splits;
  const int m0 = static_cast<int>(blockIdx.y) * Cfg::BM, n0 = static_cast<int>(blockIdx.x) * Cfg::BN;
  const int k_begin = split * kchunk, k_end = p.K - k_begin < kchunk ? p.K : k_begin + kchunk;
  const int tiles = k_begin < k_end ? (k_end - k_begin + BK - 1) / BK : 0;

  const int a_k = tid % BK, a_m = tid / BK, b_n = tid % Cfg::BN, b_k = tid / Cfg::BN;
  const bool col_ok = n0 + b_n < p.N;
  const typename Problem::Col cur = p.col(g, col_ok ? n0 + b_n : 0);

  float acc[8][8];
  EMBER_UNROLL
  for (int i = 0; i < 8; ++i) EMBER_UNROLL
  for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  if (tiles > 0) gather_slice<Cfg>(&As[0][0].x, &Bs[0][0].x, p, cur, col_ok, g, m0, k_begin, k_end, a_m, a_k, b_n, b_k);
  cp_async_wait_all();
  __syncthreads();
  for (int t = 0; t < tiles; ++t) {
    const int s = t & 1;
    // The other stage was last read before the previous iteration's barrier: free to overwrite.
    if (t + 1 < tiles)
      gather_slice<Cfg>(&As[s ^ 1][0].x, &Bs[s ^ 1][0].x, p, cur, col_ok, g, m0, k_begin + (t + 1) * BK, k_end, a_m,
                        a_k, b_n, b_k);
    multiply_slice<Cfg>(acc, As[s], Bs[s], wm, wn, lm, ln);
    cp_async_wait_all();
    __syncthreads();
  }

  // A lane's rows: wm + lm * 4 + {0..3} and + 32; its columns wn + ln * 4 + {0..3} and + 16.
  EMBER_UNROLL
  for (int i = 0; i < 8; ++i) {
    const int m = m0 + wm + (i / 4) * 32 + lm * 4 + i % 4;
    if (m >= p.M) continue;
    const int n = n0 + wn + ln * 4;
    if (n < p.N) store4(p, g, split, m, n, acc[i]);
    if (n + 16 < p.N) store4(p, g, split, m, n + 16, acc[i] + 4);
  }
}

}  // namespace ember::cuda::conv
