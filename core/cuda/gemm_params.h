// The parameters of one native CUDA GEMM launch (core/cuda/gemm.cu) and the output store every
// GEMM kernel shares, for kernel files only (after core/cuda/device_api.h).
#pragma once

#include <cstdint>

#include "core/cuda/device_api.h"

namespace ember::cuda {

template <typename T>
struct Params {
  const T* a;
  const T* b;
  T* c;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t batch;
  int m, n, k;
  int m_on_x;  // row tiles on grid x, column tiles on y (core/cuda/gemm_geometry.h); else the reverse
  T alpha, beta;
};

// C = alpha acc + beta C (beta == 0: C is write-only, so old NaNs do not leak through 0 * NaN).
template <typename T>
EMBER_DEVICE void store_c(T* C, const Params<T>& p, int m, int n, T acc) {
  if (m < p.m && n < p.n) {
    T* out = C + static_cast<int64_t>(m) * p.ldc + n;
    *out = p.beta == T(0) ? p.alpha * acc : p.alpha * acc + p.beta * *out;
  }
}

}  // namespace ember::cuda
