// CUDA conv2d forward, backward-data and backward-filter (core/nn_kernels.h) as implicit GEMMs:
// no im2col buffer; each pass is a GEMM whose operands are gathered from the tensors while a
// tile is loaded into shared memory. The three passes differ only in a Problem that maps GEMM
// coordinates to tensor positions (core/cuda/conv_problems.h, which has the three GEMMs). Two
// kernels run them:
//   float:  implicit_gemm_warptile (core/cuda/conv_warptile.h), the float GEMM's warp tiles fed by
//           4-byte cp.async gathers: 128 x 128 output tiles (64 x 128 when M <= 64, as the
//           forward of a layer with 64 output channels), 8-deep K slices, 8 x 8 outputs a lane;
//   double: implicit_gemm below, a 64x64 output tile per block of 256 threads, 16-deep K slices
//           staged in shared memory, each thread a 4x4 block of accumulators in registers;
//   bfloat16 and float16: implicit_gemm_bf16 (core/cuda/conv_bf16_mma.h), the 16-bit GEMM's
//           tensor-core tiles (128 x 128, mma.sync m16n8k16), float32 accumulation, outputs
//           rounded once.
// conv_transpose2d's forward is backward-data and its backward-data is forward (the op layer
// swaps them). The filter gradient's K (batch x output pixels) is long, so it is split over
// blockIdx.z into slices whose partial products a second kernel adds in a fixed order
// (deterministic: no atomics). The bias gradient is a per-channel block reduction.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/cuda/block_reduce.h"
#include "core/cuda/conv_bf16_mma.h"
#include "core/cuda/conv_problems.h"
#include "core/cuda/conv_warptile.h"
#include "core/cuda/device_api.h"
#include "core/cuda/grid_fill.h"
#include "core/cuda/half.h"
#include "core/cuda/launch.h"
#include "core/element_ptr.h"
#include "core/error.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

using conv::BackwardData;
using conv::BackwardFilter;
using conv::Dims;
using conv::Forward;

constexpr int kBM = 64, kBN = 64, kBK = 16;          // block tile: M x N outputs, K slice
constexpr int kTM = 4, kTN = 4;                      // per-thread register block
constexpr int kThreads = (kBM / kTM) * (kBN / kTN);  // 256
static_assert(kBM * kBK == 4 * kThreads && kBN * kBK == 4 * kThreads, "each thread loads 4 of A and 4 of B");

// ------------------------------------------------------------------ the GEMM
// Grid: x over N tiles, y over M tiles, z over groups x K splits (split = z % splits); each split
// covers K range [split * kchunk, min(K, (split + 1) * kchunk)), kchunk a multiple of kBK. A thread's
// 4x4 outputs are rows ty + 16 i and columns tx + 16 j (not 4 adjacent ones): the 16 threads of a
// half-warp then read 16 consecutive shared-memory words (no bank conflicts) and store 16
// consecutive output positions (coalesced). The next
// K slice is fetched into registers while the current one is multiplied out of shared memory, so
// the global loads' latency overlaps the arithmetic.
template <typename T, typename Problem>
__global__ void __launch_bounds__(kThreads) implicit_gemm(Problem p, int splits, int kchunk) {
  // Padding staggers the banks between rows (every access here is scalar, so rows need no 16-byte
  // alignment). A's store writes 16 rows (a_k) x 2 columns per warp: a row stride of 2 mod 32
  // words puts them in 32 different banks (with +4, rows 8 apart met in one bank: 2 wavefronts).
  EMBER_SHARED(T, As, [kBK][kBM + 2]);
  EMBER_SHARED(T, Bs, [kBK][kBN + 4]);
  const int tid = static_cast<int>(threadIdx.x);
  const int tx = tid % (kBN / kTN), ty = tid / (kBN / kTN);
  const int g = static_cast<int>(blockIdx.z) / splits, split = static_cast<int>(blockIdx.z) % splits;
  const int m0 = static_cast<int>(blockIdx.y) * kBM, n0 = static_cast<int>(blockIdx.x) * kBN;
  const int k_begin = split * kchunk, k_end = p.K - k_begin < kchunk ? p.K : k_begin + kchunk;

  // Loaders: A by 16 consecutive k of 4 rows (k is A's contiguous dim in the forward), B by one
  // column per thread (its position decoded once) and 4 k rows.
  const int a_k = tid % kBK, a_m = tid / kBK;  // rows a_m + 16 i
  const int b_n = tid % kBN, b_k = tid / kBN;  // k rows b_k + 4 i
  const bool col_ok = n0 + b_n < p.N;
  const typename Problem::Col cur = p.col(g, col_ok ? n0 + b_n : 0);
  T a_next[4], b_next[4];
  auto fetch = [&](int k0) {
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + a_m + 16 * i, k = k0 + a_k;
      a_next[i] = m < p.M && k < k_end ? *p.a_ptr(g, m, k) : T(0);
    }
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int k = k0 + b_k + 4 * i;
      b_next[i] = col_ok && k < k_end ? conv::load(p.b_src(cur, k)) : T(0);
    }
  };

  T acc[kTM][kTN];
  EMBER_UNROLL
  for (int i = 0; i < kTM; ++i) EMBER_UNROLL
  for (int j = 0; j < kTN; ++j) acc[i][j] = T(0);

  if (k_begin < k_end) fetch(k_begin);
  for (int k0 = k_begin; k0 < k_end; k0 += kBK) {
    EMBER_UNROLL
    for (int i = 0; i < 4; ++i) {
      As[a_k][a_m + 16 * i] = a_next[i];
      Bs[b_k + 4 * i][b_n] = b_next[i];
    }
    __syncthreads();
    if (k0 + kBK < k_end) fetch(k0 + kBK);
    EMBER_UNROLL
    for (int kk = 0; kk < kBK; ++kk) {
      T av[kTM], bv[kTN];
      EMBER_UNROLL
      for (int i = 0; i < kTM; ++i) av[i] = As[kk][ty + i * (kBM / kTM)];
      EMBER_UNROLL
      for (int j = 0; j < kTN; ++j) bv[j] = Bs[kk][tx + j * (kBN / kTN)];
      EMBER_UNROLL
      for (int i = 0; i < kTM; ++i) EMBER_UNROLL
      for (int j = 0; j < kTN; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();  // the tile is consumed before the next slice overwrites it
  }

  EMBER_UNROLL
  for (int i = 0; i < kTM; ++i) {
    const int m = m0 + ty + i * (kBM / kTM);
    if (m >= p.M) break;
    EMBER_UNROLL
    for (int j = 0; j < kTN; ++j) {
      const int n = n0 + tx + j * (kBN / kTN);
      if (n < p.N) conv::store(p, g, split, m, n, acc[i][j]);
    }
  }
}

// An element as a number, and a number as an element: uint16_t holds bfloat16 bits, or float16's
// when kF16.
template <bool kF16, typename T>
EMBER_DEVICE double widen(T v) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return bf16mma::to_float(kF16, v);
  else
    return static_cast<double>(v);
}
template <typename T, bool kF16, typename S>
EMBER_DEVICE T narrow(S v) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return bf16mma::to_bits(kF16, static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// out[i] = sum over s of part[s * n + i], in order (the partial sums' type P; 16-bit ones' are float).
template <typename T, typename P, bool kF16>
__global__ void sum_splits(T* out, const P* part, int64_t splits, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    P s = P(0);
    for (int64_t k = 0; k < splits; ++k) s += part[k * n + i];
    out[i] = narrow<T, kF16>(s);
  }
}

struct AddF {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};

// grad_bias[oc] = sum of dy over images and output pixels: one block per channel.
template <typename T, bool kF16>
__global__ void bias_grad(T* gb, const T* dy, int64_t N, int64_t OC, int64_t P) {
  for (int64_t oc = blockIdx.x; oc < OC; oc += gridDim.x) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t r = threadIdx.x; r < P; r += blockDim.x) s += widen<kF16>(dy[(n * OC + oc) * P + r]);
    s = block_reduce(s, AddF{}, 0.0);
    if (threadIdx.x == 0) gb[oc] = narrow<T, kF16>(s);
  }
}

// ------------------------------------------------------------------ host side

constexpr int64_t kMaxGrid = 65535;  // gridDim.y and gridDim.z limit

// The float kernel's two tile configurations: 128 x 128 (8 warps), or 64 x 128 (4 warps) when the
// GEMM has at most 64 rows, which would leave half of a 128-row tile idle.
using WideTile = WarpTile<2, 4, 8>;
using ShortTile = WarpTile<1, 4, 8>;
constexpr int64_t kMaxTile = 128;

struct TileShape {
  int64_t bm, bn;
};
template <typename T>
TileShape tile_of(int64_t M) {
  if constexpr (std::is_same_v<T, uint16_t>) return TileShape{conv::Bf16Gather::BM, conv::Bf16Gather::BN};
  if constexpr (std::is_same_v<T, float>)
    return M <= ShortTile::BM ? TileShape{ShortTile::BM, ShortTile::BN} : TileShape{WideTile::BM, WideTile::BN};
  return TileShape{kBM, kBN};
}

template <typename T, bool kF16, typename Problem>
void run_gemm(const Problem& p, int64_t groups, int64_t splits, int64_t kchunk) {
  if (p.M == 0 || p.N == 0 || groups == 0) return;
  const TileShape t = tile_of<T>(p.M);
  const int64_t gx = (p.N + t.bn - 1) / t.bn, gy = (p.M + t.bm - 1) / t.bm, gz = groups * splits;
  EMBER_CHECK(gx <= 0x7fffffff && gy <= kMaxGrid && gz <= kMaxGrid, "conv2d: the implicit GEMM's grid (", gx, ", ", gy,
              ", ", gz, ") exceeds the CUDA grid limits");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz));
  if constexpr (std::is_same_v<T, uint16_t>) {
    launch(conv::implicit_gemm_bf16<Problem, kF16>, grid, conv::Bf16Gather::kThreads, 0, kernel_stream(), p,
           static_cast<int>(splits), static_cast<int>(kchunk));
  } else if constexpr (std::is_same_v<T, float>) {
    if (t.bm == ShortTile::BM)
      launch(conv::implicit_gemm_warptile<ShortTile, Problem>, grid, ShortTile::kThreads, 0, kernel_stream(), p,
             static_cast<int>(splits), static_cast<int>(kchunk));
    else
      launch(conv::implicit_gemm_warptile<WideTile, Problem>, grid, WideTile::kThreads, 0, kernel_stream(), p,
             static_cast<int>(splits), static_cast<int>(kchunk));
  } else {
    launch(implicit_gemm<T, Problem>, grid, kThreads, 0, kernel_stream(), p, static_cast<int>(splits),
           static_cast<int>(kchunk));
  }
}

// Whether 4 adjacent outputs of a row can be one store (16 bytes of float, 8 of bfloat16): the
// output aligned to it and the row's length (the positions of one image's plane, or a weight row)
// a multiple of 4.
template <typename T>
bool vector_out(const T* out, int64_t row_length) {
  if constexpr (std::is_same_v<T, double>) return false;
  return reinterpret_cast<uintptr_t>(out) % (4 * sizeof(T)) == 0 && row_length % 4 == 0;
}

// The kernels decode GEMM coordinates in 32-bit arithmetic: every dimension and the products
// they form must stay below 2^31 (with room for one tile past the end).
void check_32bit(const ConvGeometry& g, const char* op) {
  constexpr int64_t kLimit = (int64_t{1} << 31) - 4 * kMaxTile;
  const int64_t kk = g.KH * g.KW;
  for (int64_t v : {g.N * g.OH * g.OW, g.N * g.H * g.W, g.N * g.C, g.N * g.OC, g.C * kk, g.OC * kk, g.sh * g.OH,
                    g.sw * g.OW, g.H + g.ph + g.dh * g.KH, g.W + g.pw + g.dw * g.KW})
    EMBER_CHECK(v < kLimit, op, ": the convolution is too large for the CUDA kernels' 32-bit indexing (N=", g.N,
                ", C=", g.C, ", H=", g.H, ", W=", g.W, ", OC=", g.OC, ", OH=", g.OH, ", OW=", g.OW,
                "); expected every GEMM dimension below 2^31");
}

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// Runs body.template operator()<T, kF16>() with T the kernels' element type of dt: float, double,
// or uint16_t for bfloat16 and float16 (their bits; kF16 tells which).
template <typename Body>
void dispatch_conv(DType dt, const char* op, Body&& body) {
  switch (dt) {
    case DType::Float32:
      return body.template operator()<float, false>();
    case DType::Float64:
      return body.template operator()<double, false>();
    case DType::BFloat16:
      return body.template operator()<uint16_t, false>();
    case DType::Float16:
      return body.template operator()<uint16_t, true>();
    default:
      EMBER_FAIL(op, ": dtype ", dtype_name(dt),
                 " is not supported on CUDA (expected float32, float64, bfloat16 or float16)");
  }
}

void cuda_conv2d_forward(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                         const ConvGeometry& g) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device());
  dispatch_conv(input.dtype(), "conv2d", [&]<typename T, bool kF16>() {
    check_32bit(g, "conv2d");
    const Dims d = conv::dims_of(g);
    Forward<T> p{d,
                 cptr<T>(input),
                 cptr<T>(weight),
                 cptr<T>(bias),
                 mptr<T>(out),
                 d.OCg,
                 d.N * d.OH * d.OW,
                 d.Cg * d.KK,
                 vector_out(mptr<T>(out), g.OH * g.OW)};
    run_gemm<T, kF16>(p, g.groups, 1, std::max<int64_t>(p.K, 1));
  });
}

void cuda_conv2d_backward_input(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                                const Tensor& bias, const ConvGeometry& g) {
  if (grad_input.numel() == 0) return;
  DeviceGuard guard(grad_input.device());
  dispatch_conv(grad_out.dtype(), "conv2d_backward_input", [&]<typename T, bool kF16>() {
    check_32bit(g, "conv2d_backward_input");
    const Dims d = conv::dims_of(g);
    BackwardData<T> p{d,
                      cptr<T>(grad_out),
                      cptr<T>(weight),
                      cptr<T>(bias),
                      mptr<T>(grad_input),
                      d.Cg,
                      d.N * d.H * d.W,
                      d.OCg * d.KK,
                      vector_out(mptr<T>(grad_input), g.H * g.W)};
    run_gemm<T, kF16>(p, g.groups, 1, std::max<int64_t>(p.K, 1));
  });
}

// The filter gradient's K (batch x output pixels) split until the grid has enough blocks, each
// slice at least 8 K-tiles deep: {splits, slice length}.
template <typename T>
std::pair<int64_t, int64_t> k_splits(int64_t M, int64_t N, int64_t K, int64_t groups) {
  const int64_t bk = std::is_same_v<T, uint16_t> ? conv::Bf16Gather::BK : kBK;
  const TileShape ts = tile_of<T>(M);
  const int64_t tiles = ((M + ts.bm - 1) / ts.bm) * ((N + ts.bn - 1) / ts.bn) * groups;
  const int64_t max_splits = std::max<int64_t>(1, K / (8 * bk));
  int64_t splits = std::clamp<int64_t>((kFillBlocks + tiles - 1) / tiles, 1, max_splits);
  splits = std::min<int64_t>(splits, kMaxGrid / std::max<int64_t>(groups, 1));
  const int64_t kchunk = round_up(std::max<int64_t>((K + splits - 1) / splits, 1), bk);
  return {std::max<int64_t>(1, (K + kchunk - 1) / kchunk), kchunk};
}

void cuda_conv2d_backward_weight(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                                 const Tensor& input, const ConvGeometry& g) {
  DeviceGuard guard(grad_out.device());
  dispatch_conv(grad_out.dtype(), "conv2d_backward_weight", [&]<typename T, bool kF16>() {
    const Dims d = conv::dims_of(g);
    if (grad_bias.defined() && g.OC > 0)
      launch(bias_grad<T, kF16>, static_cast<unsigned>(std::min<int64_t>(g.OC, 16384)), reduce_threads(g.OH * g.OW), 0,
             kernel_stream(), mptr<T>(grad_bias), cptr<T>(grad_out), g.N, g.OC, g.OH * g.OW);
    if (!grad_weight.defined() || grad_weight.numel() == 0) return;
    check_32bit(g, "conv2d_backward_weight");
    // 16-bit partial sums stay float32 until they are added (each slice rounded would lose the bits
    // the float32 accumulation kept), so bfloat16 and float16 always go through them.
    using O = std::conditional_t<std::is_same_v<T, uint16_t>, float, T>;
    BackwardFilter<T, O> p{d, cptr<T>(grad_out), cptr<T>(input), nullptr, d.OCg, d.Cg * d.KK, d.N * d.OH * d.OW, false};
    const auto [splits, kchunk] = k_splits<T>(p.M, p.N, p.K, g.groups);
    if constexpr (std::is_same_v<O, T>) {
      if (splits == 1) {
        p.dw = mptr<T>(grad_weight);
        p.vec_out = vector_out(p.dw, p.N);
        run_gemm<T, kF16>(p, g.groups, 1, kchunk);
        return;
      }
    }
    const int64_t n = grad_weight.numel();
    Tensor part = empty({splits * n}, {.dtype = dtype_of<O>(), .device = grad_weight.device()});
    p.dw = mptr<O>(part);
    p.vec_out = vector_out(p.dw, p.N);
    run_gemm<T, kF16>(p, g.groups, splits, kchunk);
    launch(sum_splits<T, O, kF16>, static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 16384)), 256, 0,
           kernel_stream(), mptr<T>(grad_weight), cptr<O>(part), splits, n);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(conv2d_forward_stub, CUDA, cuda_conv2d_forward, Conv);
EMBER_REGISTER_KERNEL(conv2d_backward_input_stub, CUDA, cuda_conv2d_backward_input, Conv);
EMBER_REGISTER_KERNEL(conv2d_backward_weight_stub, CUDA, cuda_conv2d_backward_weight, Conv);

}  // namespace ember::cuda
