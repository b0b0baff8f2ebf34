// The launch geometry of the native GEMM kernels (core/cuda/gemm.cu), kept apart so that CI tests
// it with shapes far too large to run: CUDA allows 2^31 - 1 blocks along grid x but only 65535
// along y and z, so the larger of the two tile counts (row tiles of M, column tiles of N) goes
// on x and the smaller on y; batches go on z (the kernel loops when there are more). Ties keep
// N on x, whose neighbouring blocks share the rows of A. Plain C++, host only.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ember::cuda {

inline constexpr int64_t kGridXMax = 2147483647;  // 2^31 - 1
inline constexpr int64_t kGridYZMax = 65535;

struct GemmGrid {
  int64_t x = 1, y = 1, z = 1;
  bool m_on_x = false;  // row tiles on grid x (else on grid y)
  bool fits = false;    // every grid dimension within CUDA's limits
};

// The grid for an m x n output in bm x bn tiles, `batch` matrices.
constexpr GemmGrid gemm_grid(int64_t m, int64_t n, int64_t batch, int64_t bm, int64_t bn) {
  const int64_t tm = (m + bm - 1) / bm, tn = (n + bn - 1) / bn;
  GemmGrid g;
  g.m_on_x = tm > tn;
  g.x = std::max<int64_t>(std::max(tm, tn), 1);
  g.y = std::max<int64_t>(std::min(tm, tn), 1);
  g.z = std::clamp<int64_t>(batch, 1, kGridYZMax);
  g.fits = g.x <= kGridXMax && g.y <= kGridYZMax;
  return g;
}

// The native kernels keep coordinates inside a matrix in 32 bits, with room for one tile past
// the end.
inline constexpr int64_t kGemmDimLimit = (int64_t{1} << 31) - 256;

// Whether the native kernels can run this GEMM at all (any dtype's tiles: the smallest, 64 x 64,
// needs the largest grid). The CUDA chooser sends the rest to cuBLAS.
constexpr bool native_gemm_fits(int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (m < 0 || n < 0 || k < 0 || batch < 0) return false;
  if (m >= kGemmDimLimit || n >= kGemmDimLimit || k >= kGemmDimLimit) return false;
  return gemm_grid(m, n, batch, 64, 64).fits;
}

}  // namespace ember::cuda
