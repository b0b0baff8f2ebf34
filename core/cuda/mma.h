// Tensor-core wrappers for kernel files (the project's kernel rule 7): each is one small
// function whose sm_80+ body is inline PTX, guarded by __CUDA_ARCH__, with a portable body that
// computes the same thing with warp shuffles. The emulator (and nvcc for older GPUs) runs the
// portable body, so the fragment bookkeeping of every kernel that uses them is tested in CI; the
// PTX body is checked on a lent GPU (scripts/gpu-check.sh).
//
// mma_m16n8k8_tf32: D = A B + C for one warp, A 16 x 8 (row-major), B 8 x 8 (column-major),
// tf32 inputs, float accumulators. Fragments follow PTX's mma.m16n8k8 .tf32 layout, with
// g = lane / 4 and t = lane % 4:
//   a[0] = A[g][t]   a[1] = A[g + 8][t]   a[2] = A[g][t + 4]   a[3] = A[g + 8][t + 4]
//   b[0] = B[t][g]   b[1] = B[t + 4][g]
//   c[0] = C[g][2t]  c[1] = C[g][2t + 1]  c[2] = C[g + 8][2t]  c[3] = C[g + 8][2t + 1]  (same for d)
// All 32 lanes of the warp must call it together (it is a warp collective either way). Inputs
// should already be tf32 (to_tf32): the tensor cores ignore the low 13 mantissa bits, and so
// does the portable body.
//
// mma_m16n8k16<kF16>: D = A B + C for one warp, A 16 x 16, B 16 x 8, bfloat16 (float16 when
// kF16) inputs two to a 32-bit register (the lower k in the low half), float accumulators; PTX's
// mma.m16n8k16 .bf16 (.f16):
//   a[0] = A[g][2t, 2t+1]       a[1] = A[g + 8][2t, 2t+1]
//   a[2] = A[g][2t+8, 2t+9]     a[3] = A[g + 8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g]       b[1] = B[2t+8, 2t+9][g]
//   c, d as for tf32 (rows g, g + 8; columns 2t, 2t + 1).
// The products of two bfloat16 (or float16) are exact in float; the portable body sums them in
// float.
//
// ldmatrix_x4<Trans>(r, row): four 8 x 8 matrices of 16-bit elements from shared memory, the
// warp's fragments for the mma above. Lane l gives the address of row l % 8 of matrix l / 8 (16
// bytes, 16-byte aligned). Lane l receives in r[j] matrix j's row l / 4, elements 2 (l % 4) and
// 2 (l % 4) + 1; with Trans, matrix j's column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1 (a matrix
// stored the other way round).
#pragma once

#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/half.h"

namespace ember::cuda {

// Rounds a float to tf32 (10-bit mantissa; to nearest, ties away from zero, like cvt.rna), kept
// in a float whose low 13 mantissa bits are zero. Infinities and NaNs pass through.
EMBER_DEVICE float to_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
#else
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return __uint_as_float(u);
#endif
}

EMBER_DEVICE void mma_m16n8k8_tf32(float d[4], const float a[4], const float b[2], const float c[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(__float_as_uint(a[0])), "r"(__float_as_uint(a[1])), "r"(__float_as_uint(a[2])), "r"(__float_as_uint(a[3])),
        "r"(__float_as_uint(b[0])), "r"(__float_as_uint(b[1])), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  constexpr unsigned kAll = 0xffffffffu;
  auto trunc = [](float x) { return __uint_as_float(__float_as_uint(x) & 0xffffe000u); };
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  float r0 = c[0], r1 = c[1], r2 = c[2], r3 = c[3];
  // For k = q and q + 4: A[g][k], A[g + 8][k] sit in lane g * 4 + q; B[k][n] in lane n * 4 + q.
  for (int q = 0; q < 4; ++q) {
    const int src_a = g * 4 + q, src_b0 = (2 * t) * 4 + q, src_b1 = (2 * t + 1) * 4 + q;
    const float a_lo0 = trunc(__shfl_sync(kAll, a[0], src_a)), a_hi0 = trunc(__shfl_sync(kAll, a[1], src_a));
    const float a_lo4 = trunc(__shfl_sync(kAll, a[2], src_a)), a_hi4 = trunc(__shfl_sync(kAll, a[3], src_a));
    const float b00 = trunc(__shfl_sync(kAll, b[0], src_b0)), b40 = trunc(__shfl_sync(kAll, b[1], src_b0));
    const float b01 = trunc(__shfl_sync(kAll, b[0], src_b1)), b41 = trunc(__shfl_sync(kAll, b[1], src_b1));
    r0 = fmaf(a_lo0, b00, fmaf(a_lo4, b40, r0));
    r1 = fmaf(a_lo0, b01, fmaf(a_lo4, b41, r1));
    r2 = fmaf(a_hi0, b00, fmaf(a_hi4, b40, r2));
    r3 = fmaf(a_hi0, b01, fmaf(a_hi4, b41, r3));
  }
  d[0] = r0, d[1] = r1, d[2] = r2, d[3] = r3;
#endif
}

template <bool kF16>
EMBER_DEVICE void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  constexpr unsigned kAll = 0xffffffffu;
  // The element in a register's low half (the lower k) and high half, as a float (exact).
  auto lo = [](uint32_t v) {
    return kF16 ? half_bits_to_float(static_cast<uint16_t>(v & 0xffffu)) : __uint_as_float(v << 16);
  };
  auto hi = [](uint32_t v) {
    return kF16 ? half_bits_to_float(static_cast<uint16_t>(v >> 16)) : __uint_as_float(v & 0xffff0000u);
  };
  // The pair of k (2q, 2q + 1) and (2q + 8, 2q + 9) of row g sits in lane g * 4 + q; of column n
  // in lane n * 4 + q.
  auto dot = [&](uint32_t x0, uint32_t x8, uint32_t y0, uint32_t y8, float acc) {
    acc = fmaf(lo(x0), lo(y0), acc);
    acc = fmaf(hi(x0), hi(y0), acc);
    acc = fmaf(lo(x8), lo(y8), acc);
    return fmaf(hi(x8), hi(y8), acc);
  };
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  float r0 = c[0], r1 = c[1], r2 = c[2], r3 = c[3];
  for (int q = 0; q < 4; ++q) {
    const int src_a = g * 4 + q, src_b0 = (2 * t) * 4 + q, src_b1 = (2 * t + 1) * 4 + q;
    const uint32_t a0 = __shfl_sync(kAll, a[0], src_a), a1 = __shfl_sync(kAll, a[1], src_a);
    const uint32_t a2 = __shfl_sync(kAll, a[2], src_a), a3 = __shfl_sync(kAll, a[3], src_a);
    const uint32_t b00 = __shfl_sync(kAll, b[0], src_b0), b10 = __shfl_sync(kAll, b[1], src_b0);
    const uint32_t b01 = __shfl_sync(kAll, b[0], src_b1), b11 = __shfl_sync(kAll, b[1], src_b1);
    r0 = dot(a0, a2, b00, b10, r0);
    r1 = dot(a0, a2, b01, b11, r1);
    r2 = dot(a1, a3, b00, b10, r2);
    r3 = dot(a1, a3, b01, b11, r3);
  }
  d[0] = r0, d[1] = r1, d[2] = r2, d[3] = r3;
#endif
}

// Hands a lane's four accumulators of the m16n8 tile whose top-left is (m, n) to put(row, column,
// value): rows m + g and m + g + 8, columns n + 2t and n + 2t + 1 (the c/d layout above, shared by
// both mma shapes).
template <typename Put>
EMBER_DEVICE void put_accumulators(int m, int n, const float d[4], Put&& put) {
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  put(m + g, n + 2 * t, d[0]);
  put(m + g, n + 2 * t + 1, d[1]);
  put(m + g + 8, n + 2 * t, d[2]);
  put(m + g + 8, n + 2 * t + 1, d[3]);
}

// The accumulators of two side-by-side m16n8 tiles (d at columns n .. n + 7, e at n + 8 .. n + 15),
// regrouped by shuffles so that each lane hands four consecutive columns of a row to
// put4(row, column, v[4]): rows m + g and m + g + 8, columns n + 4t. A row's 16 columns then leave
// as four lanes' adjacent runs, so a store request of 2-byte elements covers 32 bytes of a row
// (one sector) instead of put_accumulators' 16. Every lane shuffles (no lane may skip it); put4
// checks bounds.
template <typename Put4>
EMBER_DEVICE void put_accumulator_pairs(int m, int n, const float d[4], const float e[4], Put4&& put4) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  // Columns 4t .. 4t + 3 of the 16 are held, two each, by lanes 2t and 2t + 1 of the row's quad:
  // in d for t < 2, in e (columns 4t - 8 of it) for t >= 2.
  const int s0 = (g << 2) | ((2 * t) & 3), s1 = (g << 2) | ((2 * t + 1) & 3);
  EMBER_UNROLL
  for (int h = 0; h < 2; ++h) {
    const float d0 = __shfl_sync(kAll, d[2 * h], s0), d1 = __shfl_sync(kAll, d[2 * h + 1], s0);
    const float d2 = __shfl_sync(kAll, d[2 * h], s1), d3 = __shfl_sync(kAll, d[2 * h + 1], s1);
    const float e0 = __shfl_sync(kAll, e[2 * h], s0), e1 = __shfl_sync(kAll, e[2 * h + 1], s0);
    const float e2 = __shfl_sync(kAll, e[2 * h], s1), e3 = __shfl_sync(kAll, e[2 * h + 1], s1);
    const float v[4] = {t < 2 ? d0 : e0, t < 2 ? d1 : e1, t < 2 ? d2 : e2, t < 2 ? d3 : e3};
    put4(m + g + 8 * h, n + 4 * t, v);
  }
}

// The portable ldmatrix: each lane fetches its elements from the row addresses of the lanes that
// hold them (a shuffle of the pointers), as the hardware's crossbar does.
template <int kMatrices, bool Trans>
EMBER_DEVICE void ldmatrix_portable(uint32_t* r, const void* row) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const unsigned long long mine = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(row));
  for (int j = 0; j < kMatrices; ++j) {
    if constexpr (!Trans) {
      const auto* p = reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(__shfl_sync(kAll, mine, 8 * j + g)));
      r[j] = static_cast<uint32_t>(p[2 * t]) | static_cast<uint32_t>(p[2 * t + 1]) << 16;
    } else {
      const auto* p0 =
          reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(__shfl_sync(kAll, mine, 8 * j + 2 * t)));
      const auto* p1 =
          reinterpret_cast<const uint16_t*>(static_cast<uintptr_t>(__shfl_sync(kAll, mine, 8 * j + 2 * t + 1)));
      r[j] = static_cast<uint32_t>(p0[g]) | static_cast<uint32_t>(p1[g]) << 16;
    }
  }
}

template <bool Trans>
EMBER_DEVICE void ldmatrix_x4(uint32_t r[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
#else
  ldmatrix_portable<4, Trans>(r, row);
#endif
}

}  // namespace ember::cuda
