// CUDA SGEMM/DGEMM for gemm_stub, gemm_batched_stub and dot_stub (core/gemm_kernels.h): row-major
// C = alpha * op(A) op(B) + beta * C with either operand transposed, any leading dimensions and
// a batch (strides 0 broadcast one matrix), hand-written rather than cuBLAS (the vendor path is
// the second implementation).
//
// One kernel template, instantiated per dtype and transpose pair (the transposes decide how a
// tile is read from global memory, so they are compile-time):
//   - a BM x BN output tile per block, the K dimension walked in BK-deep slices staged in shared
//     memory, stored k-major (As[k][m], Bs[k][n]) so the inner product reads rows of both;
//   - register blocking: each thread accumulates TM x TN outputs, rows ty + i * (BM / TM) and
//     columns tx + j * (BN / TN) (strided rather than adjacent, so a half-warp reads consecutive
//     shared-memory words and stores consecutive columns of C);
//   - double buffering: two shared stages; the next slice is fetched from global memory into
//     registers before the current stage is multiplied out and stored into the other stage after,
//     so the loads' latency overlaps the arithmetic and one barrier per slice suffices.
// float: 128 x 128 x 8 tiles, 8 x 8 per thread; double: 64 x 64 x 8 tiles, 4 x 4 per thread
// (8 x 8 doubles would need more than the 255 registers a thread may have without spilling).
// Batches run on blockIdx.z (looping when there are more than the grid allows). Coordinates
// within a matrix are 32-bit (the host checks they fit), offsets 64-bit.
#include <algorithm>
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/launch.h"
#include "core/error.h"
#include "core/gemm_kernels.h"

namespace ember::cuda {
namespace {

template <typename T>
struct Tile;
template <>
struct Tile<float> {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
};
template <>
struct Tile<double> {
  static constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4;
};

template <typename T>
struct Params {
  const T* a;
  const T* b;
  T* c;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t batch;
  int m, n, k;
  T alpha, beta;
};

// Grid: x over N tiles, y over M tiles, z over batch entries (grid-strided).
template <typename T, bool TA, bool TB>
__global__ void __launch_bounds__((Tile<T>::BM / Tile<T>::TM) * (Tile<T>::BN / Tile<T>::TN)) gemm_kernel(Params<T> p) {
  using Cfg = Tile<T>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int kThreads = (BM / TM) * (BN / TN);
  constexpr int kLoadA = BM * BK / kThreads, kLoadB = BN * BK / kThreads;  // elements per thread per slice
  static_assert(BM * BK % kThreads == 0 && BN * BK % kThreads == 0, "tiles divide evenly among the threads");
  // +4: rows stay 16-byte aligned and the transposing stores of a k-contiguous operand spread
  // over the banks.
  EMBER_SHARED(T, As, [2][BK][BM + 4]);
  EMBER_SHARED(T, Bs, [2][BK][BN + 4]);

  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int m0 = static_cast<int>(blockIdx.y) * BM, n0 = static_cast<int>(blockIdx.x) * BN;
  const int tiles = (p.k + BK - 1) / BK;

  // Element e = tid + r * kThreads of a slice sits at (row, k) of the tile; the contiguous
  // dimension in global memory varies fastest over consecutive threads (coalesced reads).
  auto a_pos = [](int e, int& mm, int& kk) {
    if (TA) {  // A stored [k][m]: m contiguous
      mm = e % BM, kk = e / BM;
    } else {  // A stored [m][k]: k contiguous
      kk = e % BK, mm = e / BK;
    }
  };
  auto b_pos = [](int e, int& nn, int& kk) {
    if (TB) {  // B stored [n][k]: k contiguous
      kk = e % BK, nn = e / BK;
    } else {  // B stored [k][n]: n contiguous
      nn = e % BN, kk = e / BN;
    }
  };

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const T* A = p.a + z * p.stride_a;
    const T* B = p.b + z * p.stride_b;
    T* C = p.c + z * p.stride_c;

    T a_next[kLoadA], b_next[kLoadB];
    auto fetch = [&](int k0) {
      EMBER_UNROLL
      for (int r = 0; r < kLoadA; ++r) {
        int mm, kk;
        a_pos(tid + r * kThreads, mm, kk);
        const int m = m0 + mm, k = k0 + kk;
        a_next[r] = m < p.m && k < p.k
                        ? A[TA ? static_cast<int64_t>(k) * p.lda + m : static_cast<int64_t>(m) * p.lda + k]
                        : T(0);
      }
      EMBER_UNROLL
      for (int r = 0; r < kLoadB; ++r) {
        int nn, kk;
        b_pos(tid + r * kThreads, nn, kk);
        const int n = n0 + nn, k = k0 + kk;
        b_next[r] = n < p.n && k < p.k
                        ? B[TB ? static_cast<int64_t>(n) * p.ldb + k : static_cast<int64_t>(k) * p.ldb + n]
                        : T(0);
      }
    };
    auto stage = [&](int s) {
      EMBER_UNROLL
      for (int r = 0; r < kLoadA; ++r) {
        int mm, kk;
        a_pos(tid + r * kThreads, mm, kk);
        As[s][kk][mm] = a_next[r];
      }
      EMBER_UNROLL
      for (int r = 0; r < kLoadB; ++r) {
        int nn, kk;
        b_pos(tid + r * kThreads, nn, kk);
        Bs[s][kk][nn] = b_next[r];
      }
    };

    T acc[TM][TN];
    EMBER_UNROLL
    for (int i = 0; i < TM; ++i) EMBER_UNROLL
    for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

    if (tiles > 0) {
      fetch(0);
      stage(0);
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
      const int s = t & 1;
      const bool more = t + 1 < tiles;
      if (more) fetch((t + 1) * BK);
      EMBER_UNROLL
      for (int kk = 0; kk < BK; ++kk) {
        T av[TM], bv[TN];
        EMBER_UNROLL
        for (int i = 0; i < TM; ++i) av[i] = As[s][kk][ty + i * (BM / TM)];
        EMBER_UNROLL
        for (int j = 0; j < TN; ++j) bv[j] = Bs[s][kk][tx + j * (BN / TN)];
        EMBER_UNROLL
        for (int i = 0; i < TM; ++i) EMBER_UNROLL
        for (int j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
      }
      // The other stage was last read before the previous barrier: it is free to overwrite.
      if (more) stage(s ^ 1);
      __syncthreads();
    }

    EMBER_UNROLL
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + ty + i * (BM / TM);
      if (m < p.m) {
        EMBER_UNROLL
        for (int j = 0; j < TN; ++j) {
          const int n = n0 + tx + j * (BN / TN);
          if (n < p.n) {
            T* out = C + static_cast<int64_t>(m) * p.ldc + n;
            // beta == 0: C is write-only (old NaNs must not leak through 0 * NaN).
            *out = p.beta == T(0) ? p.alpha * acc[i][j] : p.alpha * acc[i][j] + p.beta * *out;
          }
        }
      }
    }
    // No barrier needed before the next batch entry's first stage: the loop above ends with one
    // after the last read of shared memory.
  }
}

struct AddD {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};

// out[0] = sum x[i*incx] * y[i*incy], one block, accumulated in double (float dots over long
// vectors keep their accuracy; the order is fixed, so the result is deterministic).
template <typename T>
__global__ void dot_kernel(T* out, const T* x, int64_t incx, const T* y, int64_t incy, int64_t n) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += static_cast<double>(x[i * incx]) * static_cast<double>(y[i * incy]);
  s = block_reduce(s, AddD{}, 0.0);
  if (threadIdx.x == 0) out[0] = static_cast<T>(s);
}

// ------------------------------------------------------------------ host side

constexpr int64_t kMaxGridYZ = 65535;

template <typename T, bool TA, bool TB>
void launch_gemm(const Params<T>& p) {
  using Cfg = Tile<T>;
  constexpr int kThreads = (Cfg::BM / Cfg::TM) * (Cfg::BN / Cfg::TN);
  const int64_t gx = (p.n + Cfg::BN - 1) / Cfg::BN, gy = (p.m + Cfg::BM - 1) / Cfg::BM;
  const int64_t gz = std::min<int64_t>(p.batch, kMaxGridYZ);
  EMBER_CHECK(gy <= kMaxGridYZ, "gemm: m = ", p.m, " needs ", gy, " row tiles; the CUDA grid allows at most ",
              kMaxGridYZ);
  launch(gemm_kernel<T, TA, TB>, dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)),
         kThreads, 0, kernel_stream(), p);
}

template <typename T>
void run(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  if (g.m == 0 || g.n == 0 || batch == 0) return;
  // 32-bit coordinates inside a matrix, with room for one tile past the end.
  constexpr int64_t kLimit = (int64_t{1} << 31) - 256;
  EMBER_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.m < kLimit && g.n < kLimit && g.k < kLimit, "gemm: m, n, k = ", g.m,
              ", ", g.n, ", ", g.k, "; expected each in [0, 2^31) for the CUDA kernel");
  EMBER_CHECK(batch > 0 && sa >= 0 && sb >= 0 && sc >= 0, "gemm: batch ", batch, " with strides ", sa, ", ", sb, ", ",
              sc, "; expected a positive batch and non-negative strides");
  Params<T> p;
  p.a = static_cast<const T*>(g.a);
  p.b = static_cast<const T*>(g.b);
  p.c = static_cast<T*>(g.c);
  p.lda = g.lda, p.ldb = g.ldb, p.ldc = g.ldc;
  p.stride_a = sa, p.stride_b = sb, p.stride_c = sc;
  p.batch = batch;
  p.m = static_cast<int>(g.m), p.n = static_cast<int>(g.n);
  // alpha == 0: A and B are not read (BLAS semantics: their NaNs do not reach C).
  p.k = g.alpha == 0.0 ? 0 : static_cast<int>(g.k);
  p.alpha = static_cast<T>(g.alpha), p.beta = static_cast<T>(g.beta);
  if (g.trans_a) {
    if (g.trans_b)
      launch_gemm<T, true, true>(p);
    else
      launch_gemm<T, true, false>(p);
  } else {
    if (g.trans_b)
      launch_gemm<T, false, true>(p);
    else
      launch_gemm<T, false, false>(p);
  }
}

void cuda_gemm_batched(const GemmArgs& g, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  if (g.dtype == DType::Float32) {
    run<float>(g, batch, stride_a, stride_b, stride_c);
  } else {
    EMBER_CHECK(g.dtype == DType::Float64, "gemm: dtype ", dtype_name(g.dtype), "; expected float32 or float64");
    run<double>(g, batch, stride_a, stride_b, stride_c);
  }
}

void cuda_gemm(const GemmArgs& g) {
  cuda_gemm_batched(g, 1, 0, 0, 0);
}

void cuda_dot(DType dtype, int64_t n, const void* x, int64_t incx, const void* y, int64_t incy, void* out) {
  EMBER_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "dot: dtype ", dtype_name(dtype),
              "; expected float32 or float64");
  const unsigned threads = reduce_threads(n);
  if (dtype == DType::Float32)
    launch(dot_kernel<float>, 1, threads, 0, kernel_stream(), static_cast<float*>(out), static_cast<const float*>(x),
           incx, static_cast<const float*>(y), incy, n);
  else
    launch(dot_kernel<double>, 1, threads, 0, kernel_stream(), static_cast<double*>(out), static_cast<const double*>(x),
           incx, static_cast<const double*>(y), incy, n);
}

}  // namespace

EMBER_REGISTER_CUDA_KERNEL(gemm_stub, cuda_gemm);
EMBER_REGISTER_CUDA_KERNEL(gemm_batched_stub, cuda_gemm_batched);
EMBER_REGISTER_CUDA_KERNEL(dot_stub, cuda_dot);

}  // namespace ember::cuda
