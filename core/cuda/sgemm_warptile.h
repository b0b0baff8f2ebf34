// The float GEMM's fast kernel (core/cuda/gemm.cu sends it every float GEMM whose operands allow
// 16-byte accesses; the others take gemm_kernel, the scalar fallback). Its structure is the one
// known to reach cuBLAS with plain FFMA (Boehm's SGEMM walk-through; CUTLASS's SIMT GEMM):
//   - a BM x BN output tile per block, walked over K in BK-deep slices staged in shared memory,
//     stored k-major (S[k][row]) so that the inner product reads a row of each operand;
//   - warp tiling: each warp owns a 64 x 32 sub-tile; its lanes form an 8 x 4 grid, and each lane
//     keeps an 8 x 8 register tile made of 2 x 2 blocks of 4 x 4 (rows lm*4 + {0,32}, columns
//     ln*4 + {0,16} within the warp's sub-tile), so that every shared read is one 16-byte LDS per
//     4 values: A's 8 distinct addresses of a warp fill 128 contiguous bytes and B's 4 fill 64, one
//     wavefront each (the other lanes read the same words: a broadcast);
//   - 16-byte global loads: an operand whose contiguous dimension runs along the tile's rows
//     (A transposed, B as stored) goes straight into shared memory with cp.async (sm_80+: no
//     registers, asynchronous); one whose contiguous dimension is K (A as stored, B transposed) is
//     loaded as float4 into registers and stored transposed with four 4-byte stores;
//   - two shared stages: the loads of slice t + 1 are issued before slice t is multiplied out and
//     land in the other stage, so one barrier per slice suffices and the loads overlap the FFMAs;
//   - rows padded by 4 floats: 16-byte alignment is kept, and the transposing stores of a warp
//     (16 rows x 2 k-groups of 4, see VecOperand::pos) land in 32 different banks.
// Tile configurations (WarpTile<WarpsM, WarpsN, BK>) are chosen per call (core/cuda/gemm.cu,
// EMBER_GEMM_TILE); each thread holds 64 accumulators, at most 128 registers (__launch_bounds__).
#pragma once

#include <cstdint>

#include "core/cuda/cp_async.h"
#include "core/cuda/device_api.h"
#include "core/cuda/gemm_params.h"

#if defined(__CUDACC__)
#define EMBER_GEMM_UNROLL_K _Pragma("unroll 1")
#else
#define EMBER_GEMM_UNROLL_K _Pragma("GCC unroll 1")
#endif

namespace ember::cuda {

template <int WarpsM, int WarpsN, int BK_>
struct WarpTile {
  static constexpr int kWarpsM = WarpsM, kWarpsN = WarpsN;
  static constexpr int kWarpM = 64, kWarpN = 32;  // one warp's sub-tile
  static constexpr int BM = WarpsM * kWarpM, BN = WarpsN * kWarpN, BK = BK_;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  // Blocks per SM that ptxas must fit (65536 registers per SM): 256 threads, 2 (128 registers a
  // thread, 25% occupancy); 128 threads, 3 (up to 168: at 4 blocks and 128 registers nvcc 13.0
  // spilled 8 bytes in the A B^T instantiation on sm_80).
  static constexpr int kMinBlocks = kThreads >= 256 ? 2 : 3;
  static constexpr int kPad = 4;  // floats added to every shared row (see the file comment)
};

// One operand's kRows x BK slice (kRows = BM for A, BN for B) on its way into a k-major shared
// stage S[k][row] (row stride kStride floats). kKContig: K is the operand's contiguous dimension in
// global memory (A as stored, B transposed); its slice is first copied as it lies into a staging
// buffer (rows of kStage floats) and then transposed from there into the stage. The slice is cut
// into float4 chunks along the contiguous dimension, kChunks per thread, each one cp.async.
template <int kRows, int BK, int kThreads, bool kKContig>
struct VecOperand {
  static constexpr int kChunks = kRows * BK / (4 * kThreads);  // per thread
  static_assert(kChunks >= 1 && kRows * BK % (4 * kThreads) == 0, "the slice divides evenly into float4 per thread");
  static_assert(BK == 8 || BK == 16, "the chunk layout and the staging rows assume 8 or 16");
  static_assert(kRows % 16 == 0, "16 rows per warp");
  // Staging rows: a warp's chunks (16 rows x 32 bytes, below) fill 128 consecutive words when BK is
  // 8; with 16 a row of 20 floats spreads them over the banks evenly (one wavefront per 128 bytes).
  static constexpr int kStage = BK == 8 ? 8 : BK + 4;

  // Chunk c of the slice starts at (row, k). K-contiguous: a warp's 32 chunks are 16 rows x 2
  // float4 (32 bytes of each row: whole sectors), the 2 float4 being k 0-7 of the slice, or 8-15
  // for its chunks 2 * kRows onwards; that keeps the transposing stores conflict-free (see the file
  // comment). Row-contiguous: k is the chunk's row of the slice, 4 consecutive rows of the tile.
  EMBER_DEVICE static void pos(int c, int& row, int& k) {
    if (kKContig) {
      const int rest = c / 2;
      row = rest % kRows;
      k = 4 * (c % 2 + 2 * (rest / kRows));
    } else {
      k = c / (kRows / 4);
      row = 4 * (c % (kRows / 4));
    }
  }

  // Issues the cp.async of the slice at k0 of X (leading dimension ld; the tile starts at row r0;
  // rows and k are the operand's extents): into the stage S, or the staging buffer when
  // K-contiguous. Past the edge of X the floats are zero-filled and not read.
  template <int kStride>
  EMBER_DEVICE static void copy(float* S, float* staging, const float* X, int64_t ld, int r0, int k0, int rows, int k,
                                int tid) {
    EMBER_UNROLL
    for (int i = 0; i < kChunks; ++i) {
      int row, kk;
      pos(tid + i * kThreads, row, kk);
      const int r = r0 + row, kg = k0 + kk;
      const int along = kKContig ? kg : r, extent = kKContig ? k : rows;  // the contiguous dimension
      const bool line = kKContig ? r < rows : kg < k;                     // the strided one
      const int left = extent - along;
      const int valid = !line || left <= 0 ? 0 : left < 4 ? left : 4;
      const float* src = X + (kKContig ? static_cast<int64_t>(r) * ld + kg : static_cast<int64_t>(kg) * ld + r);
      float* dst = kKContig ? staging + row * kStage + kk : S + kk * kStride + row;
      cp_async_16(dst, valid > 0 ? src : X, 4 * valid);
    }
  }
  // K-contiguous: from the staging buffer into the stage, one 16-byte read and four 4-byte stores a
  // chunk (after a barrier that follows the copies' completion).
  template <int kStride>
  EMBER_DEVICE static void transpose(float* S, const float* staging, int tid) {
    EMBER_UNROLL
    for (int i = 0; i < kChunks; ++i) {
      int row, k;
      pos(tid + i * kThreads, row, k);
      const float4 v = *reinterpret_cast<const float4*>(staging + row * kStage + k);
      S[(k + 0) * kStride + row] = v.x;
      S[(k + 1) * kStride + row] = v.y;
      S[(k + 2) * kStride + row] = v.z;
      S[(k + 3) * kStride + row] = v.w;
    }
  }
};

// Issues the copies of slice k0 of both operands into the stage (SA, SB) or, for a K-contiguous
// operand, its staging buffer (TA_, TB_), and closes the group.
template <typename Cfg, bool TA, bool TB>
EMBER_DEVICE void load_slice(float* SA, float* SB, float* TA_, float* TB_, const float* A, const float* B,
                             const Params<float>& p, int m0, int n0, int k0, int tid) {
  using OpA = VecOperand<Cfg::BM, Cfg::BK, Cfg::kThreads, !TA>;
  using OpB = VecOperand<Cfg::BN, Cfg::BK, Cfg::kThreads, TB>;
  OpA::template copy<Cfg::BM + Cfg::kPad>(SA, TA_, A, p.lda, m0, k0, p.m, p.k, tid);
  OpB::template copy<Cfg::BN + Cfg::kPad>(SB, TB_, B, p.ldb, n0, k0, p.n, p.k, tid);
  cp_async_commit();
}

template <typename Cfg, bool TA, bool TB>
EMBER_DEVICE void transpose_slice(float* SA, float* SB, const float* TA_, const float* TB_, int tid) {
  if constexpr (!TA)
    VecOperand<Cfg::BM, Cfg::BK, Cfg::kThreads, true>::template transpose<Cfg::BM + Cfg::kPad>(SA, TA_, tid);
  if constexpr (TB)
    VecOperand<Cfg::BN, Cfg::BK, Cfg::kThreads, true>::template transpose<Cfg::BN + Cfg::kPad>(SB, TB_, tid);
}

// acc += the stage's BK-deep slice: per k, two 16-byte reads of A and two of B, 64 FFMAs.
template <typename Cfg>
EMBER_DEVICE void multiply_slice(float (&acc)[8][8], const float4* SA, const float4* SB, int wm, int wn, int lm,
                                 int ln) {
  constexpr int kRowA = (Cfg::BM + Cfg::kPad) / 4, kRowB = (Cfg::BN + Cfg::kPad) / 4;  // in float4
  EMBER_GEMM_UNROLL_K
  for (int kk = 0; kk < Cfg::BK; ++kk) {
    const float4 a0 = SA[kk * kRowA + (wm >> 2) + lm], a1 = SA[kk * kRowA + (wm >> 2) + 8 + lm];
    const float4 b0 = SB[kk * kRowB + (wn >> 2) + ln], b1 = SB[kk * kRowB + (wn >> 2) + 4 + ln];
    const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
    EMBER_UNROLL
    for (int i = 0; i < 8; ++i) EMBER_UNROLL
    for (int j = 0; j < 8; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// C's rows m .. (one per i) and columns n .. n + 3 of a lane's 4 x 4 block: one 16-byte store a row
// where the 4 columns lie inside C, else the scalar store.
EMBER_DEVICE void store_c4(float* C, const Params<float>& p, int m, int n, const float* acc) {
  if (m >= p.m) return;
  if (n + 3 < p.n) {
    float4* out = reinterpret_cast<float4*>(C + static_cast<int64_t>(m) * p.ldc + n);
    float4 v = make_float4(p.alpha * acc[0], p.alpha * acc[1], p.alpha * acc[2], p.alpha * acc[3]);
    if (p.beta != 0.f) {
      const float4 old = *out;
      v.x += p.beta * old.x, v.y += p.beta * old.y, v.z += p.beta * old.z, v.w += p.beta * old.w;
    }
    *out = v;
    return;
  }
  for (int j = 0; j < 4; ++j) store_c(C, p, m, n + j, acc[j]);
}

// Requires (host-checked): A, B, C 16-byte aligned; lda, ldb, ldc and the batch strides multiples
// of 4. Grid as gemm_kernel's: row tiles on x or y (p.m_on_x), batch entries on z (grid-strided).
template <typename Cfg, bool TA, bool TB>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) sgemm_warptile(Params<float> p) {
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, kThreads = Cfg::kThreads;
  constexpr int kRowA = (BM + Cfg::kPad) / 4, kRowB = (BN + Cfg::kPad) / 4;
  EMBER_SHARED(float4, As, [2][BK * kRowA]);
  EMBER_SHARED(float4, Bs, [2][BK * kRowB]);
  // Staging buffers of the K-contiguous operands (one float4 where there is none).
  constexpr bool kStaged = !TA || TB;
  constexpr int kStage = VecOperand<BM, BK, kThreads, true>::kStage;
  EMBER_SHARED(float4, Ta, [TA ? 1 : BM * kStage / 4]);
  EMBER_SHARED(float4, Tb, [TB ? BN * kStage / 4 : 1]);

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int wm = (warp / Cfg::kWarpsN) * Cfg::kWarpM, wn = (warp % Cfg::kWarpsN) * Cfg::kWarpN;
  const int lm = lane / 4, ln = lane % 4;
  const int m0 = static_cast<int>(p.m_on_x ? blockIdx.x : blockIdx.y) * BM;
  const int n0 = static_cast<int>(p.m_on_x ? blockIdx.y : blockIdx.x) * BN;
  const int tiles = (p.k + BK - 1) / BK;

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const float* A = p.a + z * p.stride_a;
    const float* B = p.b + z * p.stride_b;
    float* C = p.c + z * p.stride_c;
    float acc[8][8];
    EMBER_UNROLL
    for (int i = 0; i < 8; ++i) EMBER_UNROLL
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    float *ta = &Ta[0].x, *tb = &Tb[0].x;
    if (tiles > 0) load_slice<Cfg, TA, TB>(&As[0][0].x, &Bs[0][0].x, ta, tb, A, B, p, m0, n0, 0, tid);
    cp_async_wait_all();
    __syncthreads();
    if (kStaged) {
      if (tiles > 0) transpose_slice<Cfg, TA, TB>(&As[0][0].x, &Bs[0][0].x, ta, tb, tid);
      __syncthreads();
    }
    for (int t = 0; t < tiles; ++t) {
      const int s = t & 1;
      const bool more = t + 1 < tiles;
      // The other stage was last read before the previous iteration's barriers, the staging
      // buffers before its last one: both are free to overwrite.
      float *na = &As[s ^ 1][0].x, *nb = &Bs[s ^ 1][0].x;
      if (more) load_slice<Cfg, TA, TB>(na, nb, ta, tb, A, B, p, m0, n0, (t + 1) * BK, tid);
      multiply_slice<Cfg>(acc, As[s], Bs[s], wm, wn, lm, ln);
      cp_async_wait_all();
      __syncthreads();
      if (kStaged && more) {  // `more` is the same in every thread: all of them reach the barrier
        transpose_slice<Cfg, TA, TB>(na, nb, ta, tb, tid);
        __syncthreads();
      }
    }

    EMBER_UNROLL
    for (int i = 0; i < 8; ++i) {
      const int m = m0 + wm + (i / 4) * 32 + lm * 4 + i % 4;
      store_c4(C, p, m, n0 + wn + ln * 4, acc[i]);
      store_c4(C, p, m, n0 + wn + 16 + ln * 4, acc[i] + 4);
    }
  }
}

}  // namespace ember::cuda
