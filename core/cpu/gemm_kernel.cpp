// CPU matrix products through OpenBLAS (the OpenMP flavour, so it shares Ember's threads: called
// from inside one of our parallel regions it runs single-threaded instead of nesting), except
// float products with a small right-hand operand at the avx2 and avx512 levels, which run on the packed-panel
// kernel (below, and core/cpu/panel_gemm.h).
#include <cblas.h>

#include <climits>
#include <cstring>
#include <vector>

#include "core/cpu/bf16_gemm.h"
#include "core/cpu/lowp_reference.h"
#include "core/cpu/panel_gemm.h"
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

// ------------------------------------------------------------------ the packed-panel kernel

// float products whose op(B) is small run on the packed-panel kernel of core/cpu/panel_gemm.h,
// op(B) packed and op(A) read where it lies, instead of through OpenBLAS, which packs both operands
// at every call and, at beta = 0, first zeroes C in a pass of its own. Measured on a Zen 3 VM
// (avx2), each product alternating with OpenBLAS in one process, one thread, a quiet machine: the
// LSTM's input projection 3200 x 512 x 128 (x W_ih^T) 1.14x and its input gradient 1.07x; the
// LSTM classifier's head weight gradient (dY^T X, 10,000 x 128 x 32) 1.52x; a linear layer's
// weight gradient 64 x 576 x 64 1.12x, 784 x 256 x 64 1.27x; its input gradient 64 x 576 x 64
// 1.17x. Where it lost (measured with another benchmark running beside it), OpenBLAS keeps the
// product: op(B) over kPanelMaxPacked values (out of L2 once packed: 64 x 784 x 256, 0.91x), op(A)
// stored transposed and K beyond one 256-deep block (read down its columns, 512 x 128 x 3200,
// 0.96x), op(B) stored transposed (packed by a gather) for fewer than kPanelMinRowsGather rows
// (64 x 64 x 576 at two threads, 0.86x), op(B)'s panels less than 3/4 its own columns. These
// bounds were measured at avx2 (Zen 3); at avx512 (Zen 5, 32-column panels against OpenBLAS's
// SkylakeX kernels) the same bounds left the training steps level or up to 6% faster (the MLP
// GAN). Only where the level's float kernel is a vector one (panel_gemm.h); alpha 1 and beta 0 or
// 1 (linear layers, their gradients and matmul), else BLAS.
constexpr int64_t kPanelMaxPacked = int64_t{1} << 16;
constexpr int64_t kPanelMinRows = 16, kPanelMinRowsGather = 128;
constexpr int64_t kPanelMinMacs = int64_t{1} << 20;  // a thread's share of rows does at least this much

// Whether op(B)'s panels (kPanel columns each) hold at least 3/4 its own columns.
bool fills_panels(int64_t cols) {
  const int64_t padded = cpu::panel::panel_count(cols) * cpu::panel::kPanel;
  return 4 * cols >= 3 * padded;
}

bool panel_applies(const GemmArgs& g) {
  if (!cpu::panel::kVectorFloatKernel || g.alpha != 1.0 || (g.beta != 0.0 && g.beta != 1.0)) return false;
  return g.k * g.n <= kPanelMaxPacked && g.m >= (g.trans_b ? kPanelMinRowsGather : kPanelMinRows) &&
         fills_panels(g.n) && (!g.trans_a || g.k <= cpu::panel::kBlockK);
}

// C [M, N] (+)= A B for A read as L says and B packed [K, N]: rows split across threads.
template <cpu::panel::ALayout L>
void panel_rows(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* packed, float* c,
                int64_t ldc, bool accumulate) {
  const int64_t grain = std::max<int64_t>(cpu::panel::kMaxRows, kPanelMinMacs / std::max<int64_t>(1, N * K));
  parallel_for(0, M, grain, [&](int64_t r0, int64_t r1) {
    cpu::panel::gemm_packed<L>(r1 - r0, N, K, cpu::panel::a_at<L>(a, lda, r0, 0), lda, packed, c + r0 * ldc, ldc,
                               accumulate);
  });
}

void panel_gemm(const GemmArgs& g, const float* a, const float* b, float* c) {
  namespace P = cpu::panel;
  const int64_t M = g.m, N = g.n, K = g.k;
  // A vector aligned by hand, not a Tensor: at the levels without this path the function is dead
  // code, and a Tensor would make the avx2 copy alone define shared_ptr's weak symbols, which one
  // level's copy could then lend the others (compiler.cpu_dispatch_symbols).
  std::vector<float> buf(static_cast<size_t>(P::packed_size(K, N) + 16));
  float* pk = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) & ~uintptr_t{63});
  if (g.trans_b)  // B [N, K]
    P::pack(K, N, pk, [&](int64_t k, int64_t n) { return b[n * g.ldb + k]; });
  else
    P::pack(K, N, pk, [&](int64_t k, int64_t n) { return b[k * g.ldb + n]; });
  if (g.trans_a)  // A [K, M], read down its columns
    panel_rows<P::ALayout::kColumns>(M, N, K, a, g.lda, pk, c, g.ldc, g.beta == 1.0);
  else
    panel_rows<P::ALayout::kRows>(M, N, K, a, g.lda, pk, c, g.ldc, g.beta == 1.0);
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
  if constexpr (std::is_same_v<T, float>) {
    if (panel_applies(g)) return panel_gemm(g, a, b, c);
    cblas_sgemm(CblasRowMajor, tr(g.trans_a), tr(g.trans_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else
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

// float16/bfloat16 GEMM, the reference path (core/cpu/lowp_reference.h): each operand widened to
// a dense float32 matrix, one SGEMM (float32 accumulation), C rounded back to nearest even.
void gemm_lowp_reference(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  auto dense = [&](const void* p, bool trans, int64_t rows, int64_t cols, int64_t ld) {
    const int64_t r = trans ? cols : rows, c = trans ? rows : cols;  // as stored
    std::vector<float> out(static_cast<size_t>(r * c));
    for (int64_t i = 0; i < r; ++i)
      cpu::lowp::to_float(g.dtype, static_cast<const uint16_t*>(p) + i * ld, out.data() + i * c, c);
    return out;
  };
  const std::vector<float> a = dense(g.a, g.trans_a, g.m, g.k, g.lda);
  const std::vector<float> b = dense(g.b, g.trans_b, g.k, g.n, g.ldb);
  std::vector<float> c(static_cast<size_t>(g.m * g.n), 0.0f);
  auto* c16 = static_cast<uint16_t*>(g.c);
  if (g.beta != 0.0)
    for (int64_t i = 0; i < g.m; ++i) cpu::lowp::to_float(g.dtype, c16 + i * g.ldc, c.data() + i * g.n, g.n);
  GemmArgs f = g;
  f.dtype = DType::Float32;
  f.lda = g.trans_a ? g.m : g.k;
  f.ldb = g.trans_b ? g.k : g.n;
  f.ldc = g.n;
  gemm_typed<float>(f, a.data(), b.data(), c.data());
  for (int64_t i = 0; i < g.m; ++i) cpu::lowp::from_float(g.dtype, c.data() + i * g.n, c16 + i * g.ldc, g.n);
}

void cpu_gemm(const GemmArgs& g) {
  check_blas_int(g);
  if (g.dtype == DType::BFloat16)
    cpu::gemm_bf16(g);
  else if (g.dtype == DType::Float32)
    gemm_typed<float>(g, static_cast<const float*>(g.a), static_cast<const float*>(g.b), static_cast<float*>(g.c));
  else if (g.dtype == DType::Float64)
    gemm_typed<double>(g, static_cast<const double*>(g.a), static_cast<const double*>(g.b), static_cast<double*>(g.c));
  else if (cpu::lowp::is_16bit(g.dtype))
    gemm_lowp_reference(g);
  else
    EMBER_FAIL("gemm: dtype ", dtype_name(g.dtype),
               " is not supported (expected float32, float64, float16 or bfloat16)");
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
  else if (cpu::lowp::is_16bit(g.dtype))
    for (int64_t i = 0; i < batch; ++i) {
      GemmArgs gi = g;
      gi.a = static_cast<const uint16_t*>(g.a) + i * sa;
      gi.b = static_cast<const uint16_t*>(g.b) + i * sb;
      gi.c = static_cast<uint16_t*>(g.c) + i * sc;
      gemm_lowp_reference(gi);
    }
  else
    EMBER_FAIL("gemm: dtype ", dtype_name(g.dtype),
               " is not supported (expected float32, float64, float16 or bfloat16)");
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
    } else if (cpu::lowp::is_16bit(dt)) {
      for (int64_t i = start; i < start + len; ++i) {
        float xv, yv;
        cpu::lowp::to_float(dt, static_cast<const uint16_t*>(x) + i * incx, &xv, 1);
        cpu::lowp::to_float(dt, static_cast<const uint16_t*>(y) + i * incy, &yv, 1);
        acc += static_cast<double>(xv) * yv;
      }
    } else {
      EMBER_FAIL("dot: dtype ", dtype_name(dt), " is not supported (expected float32, float64, float16 or bfloat16)");
    }
  }
  if (cpu::lowp::is_16bit(dt)) {
    const float r = static_cast<float>(acc);
    cpu::lowp::from_float(dt, &r, out, 1);
  } else if (dt == DType::Float32)
    *static_cast<float*>(out) = static_cast<float>(acc);
  else
    *static_cast<double*>(out) = acc;
}

}  // namespace

EMBER_REGISTER_KERNEL(gemm_stub, CPU, cpu_gemm);
EMBER_REGISTER_KERNEL(gemm_batched_stub, CPU, cpu_gemm_batched);
EMBER_REGISTER_KERNEL(dot_stub, CPU, cpu_dot);

}  // namespace ember
