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
#pragma once

#include <cstdint>

#include "core/cuda/device_api.h"

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

}  // namespace ember::cuda
