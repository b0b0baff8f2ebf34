// Kernel interface for matrix products. The op layer (core/ops/linalg.cpp) checks shapes and
// dtypes, lays every operand out as a BLAS matrix (row-major with a leading dimension, or the
// transpose of one, so that transposed views need no copy) and calls these stubs; the CPU
// registers OpenBLAS, a CUDA backend registers cuBLAS or its own kernels. All matrices are
// row-major: C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, where op(X) is X or X^T and
// the pointers are device pointers to float (dtype float32) or double (float64). When beta is 0
// C is write-only (its old contents, even NaN, are ignored).
//
// dtype bfloat16: A and B are bfloat16 and the products accumulate in float32; C is bfloat16
// (rounded to nearest even once, at the end) or, with c_float32, float32 (what a layer that keeps
// float32 workspaces or sums several products wants). On the CPU the avx512bf16 level runs
// vdpbf16ps (core/cpu/bf16_gemm.h); lower levels widen to float32 and run SGEMM.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/dtype.h"

namespace ember {

struct GemmArgs {
  DType dtype = DType::Float32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1.0, beta = 0.0;
  const void* a = nullptr;
  int64_t lda = 1;
  const void* b = nullptr;
  int64_t ldb = 1;
  void* c = nullptr;
  int64_t ldc = 1;
  bool c_float32 = false;  // dtype bfloat16 only: C is float32
  // dtype bfloat16 only: A and B are float32, rounded to bfloat16 as the GEMM packs them (one pass
  // over each operand instead of a rounded copy and then the packing).
  bool ab_float32 = false;
};

// One GEMM.
using GemmFn = void(const GemmArgs& g);
// `batch` GEMMs; matrix i uses a + i*stride_a, b + i*stride_b, c + i*stride_c (strides in
// elements; 0 reuses one matrix for every batch entry, which is how broadcasting arrives). C
// matrices never overlap.
using GemmBatchedFn = void(const GemmArgs& g, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c);
// out[0] = sum_i x[i*incx] * y[i*incy]; out is a device pointer to one element.
using DotFn = void(DType dtype, int64_t n, const void* x, int64_t incx, const void* y, int64_t incy, void* out);

EMBER_DECLARE_STUB(gemm_stub, GemmFn);
EMBER_DECLARE_STUB(gemm_batched_stub, GemmBatchedFn);
EMBER_DECLARE_STUB(dot_stub, DotFn);

}  // namespace ember
