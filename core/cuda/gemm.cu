// CUDA SGEMM/DGEMM for gemm_stub, gemm_batched_stub and dot_stub (core/gemm_kernels.h): row-major
// C = alpha * op(A) op(B) + beta * C with either operand transposed, any leading dimensions and
// a batch (strides 0 broadcast one matrix), hand-written rather than cuBLAS (the vendor path is
// the second implementation).
//
// float GEMMs whose matrices are 16-byte aligned with leading dimensions and batch strides in
// multiples of 4 floats (most: the caching allocator hands out 512-byte blocks of cudaMalloc's
// 256-byte aligned memory, and most widths are multiples of 4) run the vectorised warp-tiled
// kernel of core/cuda/sgemm_warptile.h (16-byte loads, cp.async into two shared stages, 64 x 32
// warp tiles read with 16-byte shared loads; its tile configuration per call: core/cuda/gemm_tuning.h). The others, and
// every double GEMM, run gemm_kernel below, the scalar design: one template per dtype and transpose pair (the
// transposes decide how a tile is read from global memory, so they are compile-time):
//   - a BM x BN output tile per block, the K dimension walked in BK-deep slices staged in shared
//     memory, stored k-major (As[k][m], Bs[k][n]) so the inner product reads rows of both;
//   - register blocking: each thread accumulates TM x TN outputs, rows ty + i * (BM / TM) and
//     columns tx + j * (BN / TN) (strided rather than adjacent, so a half-warp reads consecutive
//     shared-memory words and stores consecutive columns of C);
//   - two shared stages: the next slice is stored into the other stage while the current one is
//     read, so one barrier per slice suffices. double fetches the next slice into registers
//     before multiplying the current one out (the loads' latency overlaps the arithmetic);
//     float fetches it after (kPrefetch), because the 8 registers in flight are what keeps it
//     from two resident blocks: the second block's warps hide the latency instead.
// float: 128 x 128 x 8 tiles, 8 x 8 per thread, at most 128 registers (__launch_bounds__ with two
// blocks per SM: 25% occupancy; without it ptxas took 179-206 registers, one block, 12.5%);
// double: 64 x 64 x 8 tiles, 4 x 4 per thread, one block per SM (8 x 8 doubles would need more
// than the 255 registers a thread may have without spilling).
// A float GEMM can instead run on the tensor cores (EMBER_GEMM_TF32=1, gemm_tf32_kernel) through
// the mma wrapper of core/cuda/mma.h, whose portable body the emulator runs.
// Row and column tiles go on grid x and y, the larger count on x (core/cuda/gemm_geometry.h: x
// allows 2^31 - 1 blocks, y only 65535); batches run on blockIdx.z (looping when there are more
// than the grid allows). Coordinates
// within a matrix are 32-bit (the host checks they fit), offsets 64-bit.
// Split-K: a float GEMM on the warp-tiled kernel whose tiles would leave most of a GPU idle (at most
// one block per SM of an H100) while its K is deep runs as slices of K, each a batch entry of
// the same kernel writing its partial product into a float workspace, then `gemm_sum_splits` adds them
// in slice order (deterministic: no atomics) and applies alpha and beta: MnistCnn's fc1
// (64 x 128 x 3136) is 1 block unsplit, 49 slices of 64 split (the kernel report's targets show
// the fill).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/gemm_bf16_mma.h"
#include "core/cuda/gemm_geometry.h"
#include "core/cuda/gemm_params.h"
#include "core/cuda/gemm_tuning.h"
#include "core/cuda/grid_fill.h"
#include "core/cuda/launch.h"
#include "core/cuda/mma.h"
#include "core/cuda/sgemm_warptile.h"
#include "core/cuda/tuned/tables.h"
#include "core/error.h"
#include "core/gemm_kernels.h"
#include "core/tensor.h"

// Two iterations of a loop at a time (see gemm_kernel's k loop).
#if defined(__CUDACC__)
#define EMBER_GEMM_UNROLL_2 _Pragma("unroll 2")
#else
#define EMBER_GEMM_UNROLL_2 _Pragma("GCC unroll 2")
#endif

namespace ember::cuda {
namespace {

template <typename T>
struct Tile;
template <>
struct Tile<float> {
  static constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, kMinBlocks = 2;
  static constexpr bool kPrefetch = false;
};
template <>
struct Tile<double> {
  static constexpr int BM = 64, BN = 64, BK = 8, TM = 4, TN = 4, kMinBlocks = 1;
  static constexpr bool kPrefetch = true;
};

// Moves one BK-deep slice of op(A) (BM x BK) and op(B) (BK x BN) from global memory into
// registers (fetch) and from there into a shared-memory stage stored k-major (stage). Element
// e = tid + r * kThreads sits at (row, k) of the tile with the operand's contiguous dimension
// varying fastest over consecutive threads, so that the global reads coalesce.
template <typename T, bool TA, bool TB, int BM, int BN, int BK, int kThreads>
struct Loader {
  static constexpr int kA = BM * BK / kThreads, kB = BN * BK / kThreads;  // elements per thread
  static_assert(BM * BK % kThreads == 0 && BN * BK % kThreads == 0, "tiles divide evenly among the threads");
  T a[kA], b[kB];

  EMBER_DEVICE static void a_pos(int e, int& mm, int& kk) {
    if (TA) {  // A stored [k][m]: m contiguous
      mm = e % BM, kk = e / BM;
    } else {  // A stored [m][k]: k contiguous
      kk = e % BK, mm = e / BK;
    }
  }
  EMBER_DEVICE static void b_pos(int e, int& nn, int& kk) {
    if (TB) {  // B stored [n][k]: k contiguous
      kk = e % BK, nn = e / BK;
    } else {  // B stored [k][n]: n contiguous
      nn = e % BN, kk = e / BN;
    }
  }
  // Element r of a thread lies kAStep (kBStep) stored rows after its element r - 1, at the same
  // position along the contiguous dimension (the thread count is a multiple of that extent), so
  // one address per operand and slice serves all of them: few 64-bit products and registers.
  static constexpr int kAStep = TA ? kThreads / BM : kThreads / BK;
  static constexpr int kBStep = TB ? kThreads / BK : kThreads / BN;
  static_assert(kThreads % (TA ? BM : BK) == 0 && kThreads % (TB ? BK : BN) == 0,
                "a thread keeps its position along each operand's contiguous dimension");

  EMBER_DEVICE void fetch(const T* A, const T* B, const Params<T>& p, int m0, int n0, int k0, int tid) {
    int am, ak, bn, bk;
    a_pos(tid, am, ak);
    b_pos(tid, bn, bk);
    am += m0, ak += k0, bn += n0, bk += k0;
    const T* a_src = A + (TA ? static_cast<int64_t>(ak) * p.lda + am : static_cast<int64_t>(am) * p.lda + ak);
    const T* b_src = B + (TB ? static_cast<int64_t>(bn) * p.ldb + bk : static_cast<int64_t>(bk) * p.ldb + bn);
    const int64_t a_step = kAStep * p.lda, b_step = kBStep * p.ldb;
    EMBER_UNROLL
    for (int r = 0; r < kA; ++r) {
      const int m = TA ? am : am + r * kAStep, k = TA ? ak + r * kAStep : ak;
      a[r] = m < p.m && k < p.k ? a_src[r * a_step] : T(0);
    }
    EMBER_UNROLL
    for (int r = 0; r < kB; ++r) {
      const int n = TB ? bn + r * kBStep : bn, k = TB ? bk : bk + r * kBStep;
      b[r] = n < p.n && k < p.k ? b_src[r * b_step] : T(0);
    }
  }
  // conv maps each value on its way into shared memory (identity, or rounding to tf32).
  template <int kPadA, int kPadB, typename Conv>
  EMBER_DEVICE void stage(T (*As)[BM + kPadA], T (*Bs)[BN + kPadB], int tid, Conv conv) const {
    EMBER_UNROLL
    for (int r = 0; r < kA; ++r) {
      int mm, kk;
      a_pos(tid + r * kThreads, mm, kk);
      As[kk][mm] = conv(a[r]);
    }
    EMBER_UNROLL
    for (int r = 0; r < kB; ++r) {
      int nn, kk;
      b_pos(tid + r * kThreads, nn, kk);
      Bs[kk][nn] = conv(b[r]);
    }
  }
};

struct Identity {
  template <typename T>
  EMBER_DEVICE T operator()(T v) const {
    return v;
  }
};
struct ToTf32 {
  EMBER_DEVICE float operator()(float v) const { return to_tf32(v); }
};

// Grid: the larger of the M and N tile counts on x, the other on y (p.m_on_x says which), z over
// batch entries (grid-strided).
template <typename T, bool TA, bool TB>
__global__ void __launch_bounds__((Tile<T>::BM / Tile<T>::TM) * (Tile<T>::BN / Tile<T>::TN), Tile<T>::kMinBlocks)
    gemm_kernel(Params<T> p) {
  using Cfg = Tile<T>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  constexpr int kThreads = (BM / TM) * (BN / TN);
  // +4: rows stay 16-byte aligned and the transposing stores of a k-contiguous operand spread
  // over the banks.
  EMBER_SHARED(T, As, [2][BK][BM + 4]);
  EMBER_SHARED(T, Bs, [2][BK][BN + 4]);

  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int m0 = static_cast<int>(p.m_on_x ? blockIdx.x : blockIdx.y) * BM;
  const int n0 = static_cast<int>(p.m_on_x ? blockIdx.y : blockIdx.x) * BN;
  const int tiles = (p.k + BK - 1) / BK;

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const T* A = p.a + z * p.stride_a;
    const T* B = p.b + z * p.stride_b;
    T* C = p.c + z * p.stride_c;
    Loader<T, TA, TB, BM, BN, BK, kThreads> ld;

    T acc[TM][TN];
    EMBER_UNROLL
    for (int i = 0; i < TM; ++i) EMBER_UNROLL
    for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

    if (tiles > 0) {
      ld.fetch(A, B, p, m0, n0, 0, tid);
      ld.template stage<4, 4>(As[0], Bs[0], tid, Identity{});
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
      const int s = t & 1;
      const bool more = t + 1 < tiles;
      if (Cfg::kPrefetch && more) ld.fetch(A, B, p, m0, n0, (t + 1) * BK, tid);
      // Two k steps at a time, not all BK: unrolled fully, ptxas hoists more shared loads than the
      // 128 registers that two resident blocks leave a thread, and spills.
      EMBER_GEMM_UNROLL_2
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
      if (more) {
        if (!Cfg::kPrefetch) ld.fetch(A, B, p, m0, n0, (t + 1) * BK, tid);
        ld.template stage<4, 4>(As[s ^ 1], Bs[s ^ 1], tid, Identity{});
      }
      __syncthreads();
    }

    EMBER_UNROLL
    for (int i = 0; i < TM; ++i) EMBER_UNROLL
    for (int j = 0; j < TN; ++j) store_c(C, p, m0 + ty + i * (BM / TM), n0 + tx + j * (BN / TN), acc[i][j]);
    // No barrier needed before the next batch entry's first stage: the loop above ends with one
    // after the last read of shared memory.
  }
}

// The tensor-core float GEMM (opt-in, EMBER_GEMM_TF32=1: tf32 keeps 10 mantissa bits, about
// 1e-3 relative error, which not every caller accepts). 64 x 64 x 8 tiles, 4 warps of 32 x 32,
// each a 2 x 4 grid of m16n8k8 mma tiles with float accumulators; the same double-buffered
// loader as gemm_kernel, rounding to tf32 on the way into shared memory (once per element).
constexpr int kTfBM = 64, kTfBN = 64, kTfBK = 8, kTfThreads = 128;
constexpr int kTfPad = 8;  // row stride 72 words: fragment reads (bank g + 8t) are conflict-free

template <bool TA, bool TB>
__global__ void __launch_bounds__(kTfThreads) gemm_tf32_kernel(Params<float> p) {
  EMBER_SHARED(float, As, [2][kTfBK][kTfBM + kTfPad]);
  EMBER_SHARED(float, Bs, [2][kTfBK][kTfBN + kTfPad]);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, tq = lane & 3;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  const int m0 = static_cast<int>(p.m_on_x ? blockIdx.x : blockIdx.y) * kTfBM;
  const int n0 = static_cast<int>(p.m_on_x ? blockIdx.y : blockIdx.x) * kTfBN;
  const int tiles = (p.k + kTfBK - 1) / kTfBK;

  for (int64_t z = blockIdx.z; z < p.batch; z += gridDim.z) {
    const float* A = p.a + z * p.stride_a;
    const float* B = p.b + z * p.stride_b;
    float* C = p.c + z * p.stride_c;
    Loader<float, TA, TB, kTfBM, kTfBN, kTfBK, kTfThreads> ld;

    float acc[2][4][4];
    EMBER_UNROLL
    for (int i = 0; i < 2; ++i) EMBER_UNROLL
    for (int j = 0; j < 4; ++j) EMBER_UNROLL
    for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

    if (tiles > 0) {
      ld.fetch(A, B, p, m0, n0, 0, tid);
      ld.template stage<kTfPad, kTfPad>(As[0], Bs[0], tid, ToTf32{});
    }
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
      const int s = t & 1;
      const bool more = t + 1 < tiles;
      if (more) ld.fetch(A, B, p, m0, n0, (t + 1) * kTfBK, tid);
      float af[2][4], bf[4][2];
      EMBER_UNROLL
      for (int i = 0; i < 2; ++i) {
        const int r = wm + 16 * i + g;
        af[i][0] = As[s][tq][r], af[i][1] = As[s][tq][r + 8];
        af[i][2] = As[s][tq + 4][r], af[i][3] = As[s][tq + 4][r + 8];
      }
      EMBER_UNROLL
      for (int j = 0; j < 4; ++j) {
        const int c = wn + 8 * j + g;
        bf[j][0] = Bs[s][tq][c], bf[j][1] = Bs[s][tq + 4][c];
      }
      EMBER_UNROLL
      for (int i = 0; i < 2; ++i) EMBER_UNROLL
      for (int j = 0; j < 4; ++j) mma_m16n8k8_tf32(acc[i][j], af[i], bf[j], acc[i][j]);
      if (more) ld.template stage<kTfPad, kTfPad>(As[s ^ 1], Bs[s ^ 1], tid, ToTf32{});
      __syncthreads();
    }

    EMBER_UNROLL
    for (int i = 0; i < 2; ++i) EMBER_UNROLL
    for (int j = 0; j < 4; ++j)
      put_accumulators(m0 + wm + 16 * i, n0 + wn + 8 * j, acc[i][j],
                       [&](int m, int n, float v) { store_c(C, p, m, n, v); });
  }
}

struct AddD {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};

// out[0] = sum x[i*incx] * y[i*incy], accumulated in double (float dots over long vectors keep
// their accuracy). Short vectors: one block (dot_kernel). Long ones: two stages, so that the
// whole GPU reads the vectors: dot_slices gives block b the contiguous range b of `blocks` and
// writes its partial sum, dot_finish adds the partials in block order. Either way the order is
// fixed by n alone, so the result is deterministic.
template <typename T>
__global__ void dot_kernel(T* out, const T* x, int64_t incx, const T* y, int64_t incy, int64_t n) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += static_cast<double>(x[i * incx]) * static_cast<double>(y[i * incy]);
  s = block_reduce(s, AddD{}, 0.0);
  if (threadIdx.x == 0) out[0] = static_cast<T>(s);
}

template <typename T>
__global__ void dot_slices(double* partial, const T* x, int64_t incx, const T* y, int64_t incy, int64_t n) {
  const int64_t chunk = (n + gridDim.x - 1) / gridDim.x, i0 = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t i1 = i0 + chunk < n ? i0 + chunk : n;
  double s = 0;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
    s += static_cast<double>(x[i * incx]) * static_cast<double>(y[i * incy]);
  s = block_reduce(s, AddD{}, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

template <typename T>
__global__ void dot_finish(T* out, const double* partial, int64_t blocks) {
  double s = 0;
  for (int64_t b = threadIdx.x; b < blocks; b += blockDim.x) s += partial[b];
  s = block_reduce(s, AddD{}, 0.0);
  if (threadIdx.x == 0) out[0] = static_cast<T>(s);
}

// ------------------------------------------------------------------ host side

// The grid for p in bm x bn tiles (core/cuda/gemm_geometry.h), recording in p which grid
// dimension carries the row tiles.
template <typename T>
dim3 grid_for(Params<T>& p, int bm, int bn) {
  const GemmGrid g = gemm_grid(p.m, p.n, p.batch, bm, bn);
  EMBER_CHECK(g.fits, "gemm: m = ", p.m, " and n = ", p.n, " need ", g.x, " x ", g.y,
              " tiles; the CUDA grid allows at most ", kGridXMax, " x ", kGridYZMax);
  p.m_on_x = g.m_on_x ? 1 : 0;
  return dim3(static_cast<unsigned>(g.x), static_cast<unsigned>(g.y), static_cast<unsigned>(g.z));
}

template <typename T, bool TA, bool TB>
void launch_gemm(Params<T> p) {
  using Cfg = Tile<T>;
  constexpr int kThreads = (Cfg::BM / Cfg::TM) * (Cfg::BN / Cfg::TN);
  const dim3 grid = grid_for(p, Cfg::BM, Cfg::BN);
  launch(gemm_kernel<T, TA, TB>, grid, kThreads, 0, kernel_stream(), p);
}

// The GPU's architecture as 10 x major + minor (90 for an H100 or H200), for the tuned tables; 0
// when it cannot be read, and in the emulator, which stands for no particular GPU (the default
// tile). Remembered per thread for its current device: a GEMM asks on every call.
int device_sm() {
#if defined(__CUDACC__)
  thread_local int last_device = -1, last_sm = 0;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (dev != last_device) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
      return 0;
    last_device = dev, last_sm = 10 * major + minor;
  }
  return last_sm;
#else
  return 0;
#endif
}

// The tile for this call (core/cuda/gemm_tuning.h): EMBER_GEMM_TILE, read on every call as
// EMBER_GEMM_TF32 is so that the autotune sweep can switch it within one process; else the
// tuned table's entry nearest the shape; else the default.
GemmTile warp_tile_for(const Params<float>& p) {
  const char* v = std::getenv("EMBER_GEMM_TILE");
  if (!v || !*v) return tuned_gemm_tile(tuned_gemm_table(device_sm()), p.m, p.n, p.k);
  const std::optional<GemmTile> t = gemm_tile_named(v);
  EMBER_CHECK(t.has_value(), "EMBER_GEMM_TILE = '", v, "'; expected one of 128x128x8, 128x64x8, 64x128x8");
  return *t;
}

// Split-K's rule: split when the output's tiles would fill at most half of kFillBlocks (one
// per SM), into enough slices to reach it, each at least kMinSplitK deep and a multiple of 4 (the
// 16-byte loads stay aligned).
constexpr int64_t kMinSplitK = 64;  // 8 of the kernel's K slices, as the conv's filter gradient takes

struct SplitK {
  int64_t splits = 1, kchunk = 0;  // every slice kchunk deep but the last (the rest of K)
};

SplitK split_k_for(const Params<float>& p, int bm, int bn) {
  if (p.batch != 1) return {};
  const int64_t tiles = ((p.m + bm - 1) / bm) * static_cast<int64_t>((p.n + bn - 1) / bn);
  const int64_t most = p.k / kMinSplitK;
  // A GPU already half full is left as it is, and so is a K too short for 4 slices: 2 would add a
  // launch (the sum) to save half of a short product (an LSTM step's 32 x 512 x 128).
  if (2 * tiles > kFillBlocks || most < 4) return {};
  const int64_t want = std::min((kFillBlocks + tiles - 1) / tiles, most);
  // Equal slices where K allows (one launch), at least half as many as wanted; else kchunk-deep
  // slices and a shorter last one, which runs as a second launch after them.
  for (int64_t splits = want; 2 * splits >= want && splits >= 2; --splits)
    if (p.k % splits == 0 && (p.k / splits) % 4 == 0) return {splits, p.k / splits};
  const int64_t kchunk = ((p.k + want - 1) / want + 7) / 8 * 8;
  const int64_t splits = (p.k + kchunk - 1) / kchunk;
  return splits < 2 ? SplitK{} : SplitK{splits, kchunk};
}

// C = alpha (the slices' partial products added in slice order) + beta C; beta 0: C is not read.
// w: [splits, m, ldw].
__global__ void gemm_sum_splits(float* c, int64_t ldc, const float* w, int64_t ldw, int64_t splits, int m, int n,
                                float alpha, float beta) {
  const int64_t total = static_cast<int64_t>(m) * n, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t slice = static_cast<int64_t>(m) * ldw;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i / n, col = i - r * n;
    float sum = 0;
    for (int64_t s = 0; s < splits; ++s) sum += w[s * slice + r * ldw + col];
    float* out = c + r * ldc + col;
    *out = beta == 0.0f ? alpha * sum : alpha * sum + beta * *out;
  }
}

// The slices as a batch of kchunk-deep GEMMs into the workspace (A and B advanced kchunk along K
// per entry), a shorter last slice alone, then their sum into C.
template <typename Cfg, bool TA, bool TB>
void launch_split_k(const Params<float>& p, SplitK sk) {
  const int64_t ldw = (p.n + 3) / 4 * 4, slice = p.m * ldw;  // rows of 16-byte multiples
  Tensor ws = empty({sk.splits, slice}, {.dtype = DType::Float32, .device = kernel_device()});
  float* w = static_cast<float*>(ws.raw_data());
  Params<float> q = p;
  q.c = w, q.ldc = ldw, q.alpha = 1.0f, q.beta = 0.0f;
  q.stride_a = TA ? sk.kchunk * p.lda : sk.kchunk;  // A is m x k, stored k x m when transposed
  q.stride_b = TB ? sk.kchunk : sk.kchunk * p.ldb;  // B is k x n, stored n x k when transposed
  q.stride_c = slice;
  const bool equal = sk.splits * sk.kchunk == p.k;
  q.k = static_cast<int>(sk.kchunk), q.batch = equal ? sk.splits : sk.splits - 1;
  launch(sgemm_warptile<Cfg, TA, TB>, grid_for(q, Cfg::BM, Cfg::BN), Cfg::kThreads, 0, kernel_stream(), q);
  if (!equal) {
    Params<float> last = q;
    last.a = p.a + q.batch * q.stride_a, last.b = p.b + q.batch * q.stride_b, last.c = w + q.batch * slice;
    last.k = static_cast<int>(p.k - q.batch * sk.kchunk), last.batch = 1;
    launch(sgemm_warptile<Cfg, TA, TB>, grid_for(last, Cfg::BM, Cfg::BN), Cfg::kThreads, 0, kernel_stream(), last);
  }
  const int64_t total = static_cast<int64_t>(p.m) * p.n;
  launch(gemm_sum_splits, static_cast<unsigned>(std::clamp<int64_t>((total + 255) / 256, 1, 4096)), 256, 0,
         kernel_stream(), p.c, p.ldc, static_cast<const float*>(w), ldw, sk.splits, p.m, p.n, p.alpha, p.beta);
}

template <typename Cfg, bool TA, bool TB>
void launch_warptile(Params<float> p) {
  const SplitK sk = split_k_for(p, Cfg::BM, Cfg::BN);
  if (sk.splits > 1) return launch_split_k<Cfg, TA, TB>(p, sk);
  const dim3 grid = grid_for(p, Cfg::BM, Cfg::BN);
  launch(sgemm_warptile<Cfg, TA, TB>, grid, Cfg::kThreads, 0, kernel_stream(), p);
}

template <bool TA, bool TB>
void launch_sgemm_fast(const Params<float>& p) {
  switch (warp_tile_for(p)) {
    case GemmTile::k128x64x8:
      return launch_warptile<WarpTile<2, 2, 8>, TA, TB>(p);
    case GemmTile::k64x128x8:
      return launch_warptile<WarpTile<1, 4, 8>, TA, TB>(p);
    case GemmTile::k128x128x8:
      break;
  }
  launch_warptile<WarpTile<2, 4, 8>, TA, TB>(p);
}

// The fast kernel reads and writes 16 bytes at a time: every matrix 16-byte aligned, every leading
// dimension and batch stride a multiple of 4 floats. Otherwise gemm_kernel, element by element.
bool vector_aligned(const Params<float>& p) {
  auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return aligned(p.a) && aligned(p.b) && aligned(p.c) && p.lda % 4 == 0 && p.ldb % 4 == 0 && p.ldc % 4 == 0 &&
         p.stride_a % 4 == 0 && p.stride_b % 4 == 0 && p.stride_c % 4 == 0;
}

template <bool TA, bool TB>
void launch_gemm_tf32(Params<float> p) {
  const dim3 grid = grid_for(p, kTfBM, kTfBN);
  launch(gemm_tf32_kernel<TA, TB>, grid, kTfThreads, 0, kernel_stream(), p);
}

// EMBER_GEMM_TF32=1 sends float GEMMs to the tensor-core kernel. Read on every call (a getenv
// is nothing next to a launch), so that a process, or a test, can switch it.
bool tf32_enabled() {
  const char* v = std::getenv("EMBER_GEMM_TF32");
  return v && v[0] == '1' && v[1] == 0;
}

// Whether the GEMM has work (an empty C has none); an ember::Error for sizes the native kernels'
// 32-bit coordinates cannot take (room for one tile past the end) or a bad batch.
bool has_work(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  if (g.m == 0 || g.n == 0 || batch == 0) return false;
  constexpr int64_t kLimit = kGemmDimLimit;
  EMBER_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.m < kLimit && g.n < kLimit && g.k < kLimit, "gemm: m, n, k = ", g.m,
              ", ", g.n, ", ", g.k, "; expected each in [0, 2^31 - 256) for the native CUDA kernel");
  EMBER_CHECK(batch > 0 && sa >= 0 && sb >= 0 && sc >= 0, "gemm: batch ", batch, " with strides ", sa, ", ", sb, ", ",
              sc, "; expected a positive batch and non-negative strides");
  return true;
}

template <typename T>
void run(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  if (!has_work(g, batch, sa, sb, sc)) return;
  Params<T> p;
  p.a = static_cast<const T*>(g.a);
  p.b = static_cast<const T*>(g.b);
  p.c = static_cast<T*>(g.c);
  p.lda = g.lda, p.ldb = g.ldb, p.ldc = g.ldc;
  p.stride_a = sa, p.stride_b = sb, p.stride_c = sc;
  p.batch = batch;
  p.m = static_cast<int>(g.m), p.n = static_cast<int>(g.n);
  p.m_on_x = 0;  // set by grid_for
  // alpha == 0: A and B are not read (BLAS semantics: their NaNs do not reach C).
  p.k = g.alpha == 0.0 ? 0 : static_cast<int>(g.k);
  p.alpha = static_cast<T>(g.alpha), p.beta = static_cast<T>(g.beta);
  if constexpr (std::is_same_v<T, float>) {
    if (tf32_enabled()) {
      if (g.trans_a)
        g.trans_b ? launch_gemm_tf32<true, true>(p) : launch_gemm_tf32<true, false>(p);
      else
        g.trans_b ? launch_gemm_tf32<false, true>(p) : launch_gemm_tf32<false, false>(p);
      return;
    }
    if (vector_aligned(p)) {
      if (g.trans_a)
        g.trans_b ? launch_sgemm_fast<true, true>(p) : launch_sgemm_fast<true, false>(p);
      else
        g.trans_b ? launch_sgemm_fast<false, true>(p) : launch_sgemm_fast<false, false>(p);
      return;
    }
  }
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

// dtype bfloat16 (core/gemm_kernels.h): the tensor-core kernel of core/cuda/gemm_bf16_mma.h where
// A and B allow its 16-byte copies (16-byte aligned, leading dimensions and batch strides
// multiples of 8 elements), else gemm_bf16_scalar.
template <bool TA, bool TB>
void launch_bf16(Bf16GemmParams p) {
  const char* name = p.f16 ? "gemm (float16)" : "gemm (bfloat16)";
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (aligned(p.a) && aligned(p.b) && p.lda % 8 == 0 && p.ldb % 8 == 0 && p.stride_a % 8 == 0 && p.stride_b % 8 == 0) {
    const GemmGrid gg = gemm_grid(p.m, p.n, p.batch, bf16mma::BM, bf16mma::BN);
    EMBER_CHECK(gg.fits, name, ": m = ", p.m, " and n = ", p.n, " need ", gg.x, " x ", gg.y,
                " tiles; the CUDA grid allows at most ", kGridXMax, " x ", kGridYZMax);
    p.m_on_x = gg.m_on_x ? 1 : 0;
    const dim3 grid(static_cast<unsigned>(gg.x), static_cast<unsigned>(gg.y), static_cast<unsigned>(gg.z));
    if (p.f16)
      launch(gemm_bf16_mma<TA, TB, true>, grid, bf16mma::kThreads, 0, kernel_stream(), p);
    else
      launch(gemm_bf16_mma<TA, TB, false>, grid, bf16mma::kThreads, 0, kernel_stream(), p);
    return;
  }
  const int64_t total = static_cast<int64_t>(p.m) * p.n * p.batch;
  launch(gemm_bf16_scalar<TA, TB>, static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65535)), 256, 0,
         kernel_stream(), p);
}

void run_bf16(const GemmArgs& g, int64_t batch, int64_t sa, int64_t sb, int64_t sc) {
  EMBER_CHECK(!g.ab_float32,
              "gemm (CUDA): bfloat16 products of float32 operands (ab_float32) are not implemented "
              "on CUDA; expected bfloat16 or float16 A and B");
  if (!has_work(g, batch, sa, sb, sc)) return;
  Bf16GemmParams p{static_cast<const uint16_t*>(g.a),
                   static_cast<const uint16_t*>(g.b),
                   g.c,
                   g.lda,
                   g.ldb,
                   g.ldc,
                   sa,
                   sb,
                   sc,
                   batch,
                   static_cast<int>(g.m),
                   static_cast<int>(g.n),
                   g.alpha == 0.0 ? 0 : static_cast<int>(g.k),  // alpha 0: A and B are not read
                   0,
                   static_cast<float>(g.alpha),
                   static_cast<float>(g.beta),
                   g.c_float32,
                   g.dtype == DType::Float16};
  if (g.trans_a)
    g.trans_b ? launch_bf16<true, true>(p) : launch_bf16<true, false>(p);
  else
    g.trans_b ? launch_bf16<false, true>(p) : launch_bf16<false, false>(p);
}

void cuda_gemm_batched(const GemmArgs& g, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  if (g.dtype == DType::BFloat16 || g.dtype == DType::Float16) {
    run_bf16(g, batch, stride_a, stride_b, stride_c);
  } else if (g.dtype == DType::Float32) {
    run<float>(g, batch, stride_a, stride_b, stride_c);
  } else {
    EMBER_CHECK(g.dtype == DType::Float64, "gemm: dtype ", dtype_name(g.dtype),
                "; expected float32, float64, bfloat16 or float16");
    run<double>(g, batch, stride_a, stride_b, stride_c);
  }
}

void cuda_gemm(const GemmArgs& g) {
  cuda_gemm_batched(g, 1, 0, 0, 0);
}

// Blocks of the two-stage dot: one per kDotSlice elements, at most kDotMaxBlocks (1: one block).
constexpr int64_t kDotSlice = 8192, kDotMaxBlocks = 1024;
int64_t dot_blocks(int64_t n) {
  return std::clamp<int64_t>(n / kDotSlice, 1, kDotMaxBlocks);
}

template <typename T>
void dot_typed(int64_t n, const T* x, int64_t incx, const T* y, int64_t incy, T* out) {
  const int64_t blocks = dot_blocks(n);
  if (blocks == 1) {
    launch(dot_kernel<T>, 1, reduce_threads(n), 0, kernel_stream(), out, x, incx, y, incy, n);
    return;
  }
  Tensor scratch = empty({blocks}, {.dtype = DType::Float64, .device = kernel_device()});
  double* partial = static_cast<double*>(scratch.raw_data());
  launch(dot_slices<T>, static_cast<unsigned>(blocks), 256, 0, kernel_stream(), partial, x, incx, y, incy, n);
  launch(dot_finish<T>, 1, reduce_threads(blocks), 0, kernel_stream(), out, partial, blocks);
}

void cuda_dot(DType dtype, int64_t n, const void* x, int64_t incx, const void* y, int64_t incy, void* out) {
  EMBER_CHECK(dtype == DType::Float32 || dtype == DType::Float64, "dot: dtype ", dtype_name(dtype),
              "; expected float32 or float64");
  if (dtype == DType::Float32)
    dot_typed(n, static_cast<const float*>(x), incx, static_cast<const float*>(y), incy, static_cast<float*>(out));
  else
    dot_typed(n, static_cast<const double*>(x), incx, static_cast<const double*>(y), incy, static_cast<double*>(out));
}

}  // namespace

EMBER_REGISTER_KERNEL(gemm_stub, CUDA, cuda_gemm, Gemm);
EMBER_REGISTER_KERNEL(gemm_batched_stub, CUDA, cuda_gemm_batched, Gemm);
EMBER_REGISTER_KERNEL(dot_stub, CUDA, cuda_dot);

}  // namespace ember::cuda
