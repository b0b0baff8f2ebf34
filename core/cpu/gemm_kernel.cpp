// CPU matrix products through OpenBLAS (the OpenMP flavour, so it shares Ember's threads: called
// from inside one of our parallel regions it runs single-threaded instead of nesting).
#include <cblas.h>

#include <climits>
#include <cstring>

#include "core/cpu/bf16_gemm.h"
#include "core/gemm_kernels.h"
#include "core/parallel.h"

namespace ember {

namespace {

// Below this many multiply-adds per matrix, a batch is spread across threads (one whole GEMM per
// thread) rather than letting OpenBLAS split each small GEMM, which it does badly.
constexpr int64_t kSmallGemmMacs = 64 * 64 * 64;
// Below this many multiply-adds in the whole batch, a parallel region costs more than it saves.
constexpr int64_t kParallelBatchMacs = 1 << 17;

void check_blas_int(const GemmArgs& g) {
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc})
    EMBER_CHECK(v <= INT_MAX, "gemm: size ", v, " exceeds the 32-bit BLAS interface (m=", g.m, ", n=", g.n, ", k=", g.k,
                ")");
}

CBLAS_TRANSPOSE tr(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

template <typename T>
void gemv(CBLAS_TRANSPOSE t, int rows, int cols, T alpha, const T* a, int lda, const T* x, int incx, T beta, T* y,
          int incy) {
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemv(CblasRowMajor, t, rows, cols, alpha, a, lda, x, incx, beta, y, incy);
  else
    cblas_dgemv(CblasRowMajor, t, rows, cols, alpha, a, lda, x, incx, beta, y, incy);
}

template <typename T>
void gemm_typed(const GemmArgs& g, const T* a, const T* b, T* c) {
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.lda), ldb = static_cast<int>(g.ldb), ldc = static_cast<int>(g.ldc);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    // BLAS may skip the product here, but C = beta * C must still hold (and ignore NaN at beta 0).
    for (int i = 0; i < m; ++i) {
      T* row = c + static_cast<int64_t>(i) * ldc;
      if (beta == T(0))
        std::memset(static_cast<void*>(row), 0, sizeof(T) * static_cast<size_t>(n));
      else
        for (int j = 0; j < n; ++j) row[j] *= beta;
    }
    return;
  }
  // Matrix-vector shapes go to GEMV: OpenBLAS's GEMM packs its operands even for one column,
  // which makes a memory-bound product several times slower.
  if (n == 1 || m == 1) {
    if (beta == T(0)) {
      // GEMV scales y by beta, which keeps a NaN that an uninitialised output may hold.
      const int len = n == 1 ? m : n, inc = n == 1 ? ldc : 1;
      for (int i = 0; i < len; ++i) c[static_cast<int64_t>(i) * inc] = T(0);
    }
    if (n == 1) {
      // y[m] (column of C, stride ldc) = op(A)[m, k] x, x = op(B)[k, 1].
      const int incx = g.trans_b ? 1 : ldb;
      if (!g.trans_a)
        gemv<T>(CblasNoTrans, m, k, alpha, a, lda, b, incx, beta, c, ldc);
      else
        gemv<T>(CblasTrans, k, m, alpha, a, lda, b, incx, beta, c, ldc);
    } else {
      // y[n] (row of C) = op(B)^T x, x = op(A)[1, k].
      const int incx = g.trans_a ? lda : 1;
      if (!g.trans_b)
        gemv<T>(CblasTrans, k, n, alpha, b, ldb, a, incx, beta, c, 1);
      else
        gemv<T>(CblasNoTrans, n, k, alpha, b, ldb, a, incx, beta, c, 1);
    }
    return;
  }
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, tr(g.trans_a), tr(g.trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, tr(g.trans_a), tr(g.trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void gemm_batched_typed(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  const T* a = static_cast<const T*>(g.a);
  const T* b = static_cast<const T*>(g.b);
  T* c = static_cast<T*>(g.c);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) gemm_typed<T>(g, a + i * sa, b + i * sb, c + i * sc);
  };
  const int64_t macs = g.m * g.n * std::max<int64_t>(g.k, 1);
  if (batch > 1 && macs < kSmallGemmMacs && batch * macs >= kParallelBatchMacs)
    parallel_for(0, batch, 2, run);
  else
    run(0, batch);
}

void cpu_gemm(const GemmArgs& g) {
  check_blas_int(g);
  if (g.dtype == DType::BFloat16)
    cpu::gemm_bf16(g);
  else if (g.dtype == DType::Float32)
    gemm_typed<float>(g, static_cast<const float*>(g.a), static_cast<const float*>(g.b), static_cast<float*>(g.c));
  else if (g.dtype == DType::Float64)
    gemm_typed<double>(g, static_cast<const double*>(g.a), static_cast<const double*>(g.b), static_cast<double*>(g.c));
  else
    EMBER_FAIL("gemm: dtype ", dtype_name(g.dtype), " is not supported (expected float32, float64 or bfloat16)");
}

// bfloat16: one product after another, each spread across the threads by gemm_bf16.
void gemm_batched_bf16(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  const size_t c_size = g.c_float32 ? sizeof(float) : sizeof(uint16_t);
  for (int64_t i = 0; i < batch; ++i) {
    GemmArgs gi = g;
    gi.a = static_cast<const uint16_t*>(g.a) + i * sa;
    gi.b = static_cast<const uint16_t*>(g.b) + i * sb;
    gi.c = static_cast<char*>(g.c) + i * sc * static_cast<int64_t>(c_size);
    cpu::gemm_bf16(gi);
  }
}

void cpu_gemm_batched(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  check_blas_int(g);
  if (g.dtype == DType::BFloat16)
    gemm_batched_bf16(g, batch, sa, sb, sc);
  else if (g.dtype == DType::Float32)
    gemm_batched_typed<float>(g, batch, sa, sb, sc);
  else if (g.dtype == DType::Float64)
    gemm_batched_typed<double>(g, batch, sa, sb, sc);
  else
    EMBER_FAIL("gemm: dtype ", dtype_name(g.dtype), " is not supported (expected float32, float64 or bfloat16)");
}

void cpu_dot(DType dt, int64_t n, const void* x, int64_t incx, const void* y, int64_t incy, void* out) {
  EMBER_CHECK(incx <= INT_MAX && incy <= INT_MAX, "dot: stride exceeds the 32-bit BLAS interface");
  // BLAS counts are 32-bit: long vectors go in pieces, summed in double.
  constexpr int64_t kPiece = int64_t{1} << 30;
  double acc = 0.0;
  for (int64_t start = 0; start < n; start += kPiece) {
    const int len = static_cast<int>(std::min(kPiece, n - start));
    if (dt == DType::Float32) {
      acc += cblas_sdot(len, static_cast<const float*>(x) + start * incx, static_cast<int>(incx),
                        static_cast<const float*>(y) + start * incy, static_cast<int>(incy));
    } else if (dt == DType::Float64) {
      acc += cblas_ddot(len, static_cast<const double*>(x) + start * incx, static_cast<int>(incx),
                        static_cast<const double*>(y) + start * incy, static_cast<int>(incy));
    } else {
      EMBER_FAIL("dot: dtype ", dtype_name(dt), " is not supported (expected float32 or float64)");
    }
  }
  if (dt == DType::Float32)
    *static_cast<float*>(out) = static_cast<float>(acc);
  else
    *static_cast<double*>(out) = acc;
}

}  // namespace

EMBER_REGISTER_KERNEL(gemm_stub, CPU, cpu_gemm);
EMBER_REGISTER_KERNEL(gemm_batched_stub, CPU, cpu_gemm_batched);
EMBER_REGISTER_KERNEL(dot_stub, CPU, cpu_dot);

}  // namespace ember
