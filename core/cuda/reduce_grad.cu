// CUDA kernels for the backward passes of reductions (core/reduce_kernels.h):
//  - reduce_grad_stub: the elementwise masks and scalings of amax/amin, norm, var/std and
//    logsumexp gradients, over operands broadcast to the gradient's shape, through the shared
//    elementwise machinery (core/cuda/elementwise_loops.h); the formulas are the CPU's, case by
//    case (which zero where, the special-cased exponents 1 and 2);
//  - index_grad_stub: max/min along a dim, the gradient placed at each row's index;
//  - prod_grad_stub: prod's exclusive products, exact with zeros because nothing is divided: the
//    product of everything before r times the product of everything after it. With the reduced
//    dim strided (C > 1) a thread per column walks it forwards and backwards, multiplying in the
//    CPU's order (so the results are the CPU's bit for bit) with loads coalesced across columns;
//    a long contiguous row (C == 1) is one block's work instead, as tiles of blockDim elements
//    whose prefix and suffix products come from a shuffle scan and a carry across tiles.
#include <algorithm>
#include <cstdint>

#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/elementwise_loops.h"
#include "core/cuda/launch.h"
#include "core/reduce_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 16384;
constexpr unsigned kFullMask = 0xffffffffu;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <typename T>
EMBER_DEVICE T sign_of(T x) {
  return static_cast<T>((x > T(0)) - (x < T(0)));
}

// NormScale's exponent, classified on the host as the CPU does.
enum class NormKind : int { One, Two, General };

// grad_in = f(x, a, b); the ops without b get b = a from the op layer and ignore it.
template <typename T>
struct ReduceGradF {
  ReduceGradOp op;
  NormKind norm;
  T pm1;  // p - 1
  EMBER_DEVICE T operator()(T v, T m, T g) const {
    switch (op) {
      case ReduceGradOp::EqMask:
        return static_cast<T>(v == m);
      case ReduceGradOp::AbsEqMask:
        return static_cast<T>(d_fabs(v) == m);
      case ReduceGradOp::EqScale:
        return v == m ? g : T(0);
      case ReduceGradOp::AbsEqSignScale:
        return d_fabs(v) == m ? sign_of(v) * g : T(0);
      case ReduceGradOp::CenteredScale:
        return g * (v - m);
      case ReduceGradOp::ExpScale:
        return m == -d_infinity<T>() ? T(0) : g * d_exp(v - m);
      case ReduceGradOp::NormScale:
        if (norm == NormKind::One) return g * sign_of(v);
        if (norm == NormKind::Two) return m == T(0) ? T(0) : g * v / m;
        return (m == T(0) || v == T(0)) ? T(0) : g * sign_of(v) * d_pow(d_fabs(v) / m, pm1);
    }
    return T(0);
  }
};

void cuda_reduce_grad(ReduceGradOp op, const Tensor& gi, const Tensor& x, const Tensor& a, const Tensor& b, double p) {
  DeviceGuard guard(gi.device());
  const NormKind norm = p == 1.0 ? NormKind::One : p == 2.0 ? NormKind::Two : NormKind::General;
  EMBER_DISPATCH_FLOAT(x.dtype(), "reduction backward", [&] {
    using T = scalar_t;
    map<T, T, T, T>(ReduceGradF<T>{op, norm, static_cast<T>(p - 1.0)}, gi, x, a, b);
  });
}

// ------------------------------------------------------------------ max/min along a dim
// grad_in [A, R, C] from g and indices [A, C]; a thread per element of grad_in.
template <typename T>
__global__ void index_grad_kernel(T* out, const T* g, const int64_t* idx, int64_t R, int64_t C, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t c = e % C, r = (e / C) % R, a = e / (R * C);
    const int64_t k = a * C + c;
    out[e] = idx[k] == r ? g[k] : T(0);
  }
}

void cuda_index_grad(const Tensor& gi, const Tensor& g, const Tensor& indices) {
  const int64_t n = gi.numel();
  if (n == 0) return;
  DeviceGuard guard(gi.device());
  EMBER_DISPATCH_FLOAT(gi.dtype(), "max/min backward", [&] {
    using T = scalar_t;
    launch(index_grad_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), static_cast<T*>(gi.raw_data()),
           static_cast<const T*>(g.raw_data()), static_cast<const int64_t*>(indices.raw_data()), gi.size(1), gi.size(2),
           n);
  });
}

// ------------------------------------------------------------------ prod
// A thread per column (a, c): the CPU's two passes in the CPU's order.
template <typename T>
__global__ void prod_grad_columns(T* out, const T* g, const T* x, int64_t A, int64_t R, int64_t C) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < A * C; e += step) {
    const int64_t a = e / C, c = e % C;
    const T* xa = x + a * R * C + c;
    T* oa = out + a * R * C + c;
    T acc = T(1);
    for (int64_t r = 0; r < R; ++r) {
      oa[r * C] = acc;
      acc *= xa[r * C];
    }
    acc = g[e];
    for (int64_t r = R - 1; r >= 0; --r) {
      oa[r * C] *= acc;
      acc *= xa[r * C];
    }
  }
}

// Exclusive product scan of v over the block (a multiple of 32 threads), in the given direction
// of thread order; returns the product of the entries before this thread and sets `total` to the
// whole block's product. Every thread of the block must call it (it holds barriers).
template <typename T>
EMBER_DEVICE T block_exclusive_product(T v, bool reverse, T* warp_total, T& total) {
  const unsigned nwarps = blockDim.x / 32;
  const unsigned tid = reverse ? blockDim.x - 1 - threadIdx.x : threadIdx.x;  // scan order
  // Lanes of a warp in scan order: reverse scans see lane 31 first.
  const unsigned lane = tid % 32, warp = tid / 32;
  T incl = v;
  EMBER_UNROLL
  for (int o = 1; o < 32; o *= 2) {
    // Lane `lane` in scan order is physical lane (reverse ? 31 - lane : lane); its o-th
    // predecessor in scan order is o physical lanes down (forward) or up (reverse).
    const T other = reverse ? __shfl_down_sync(kFullMask, incl, o) : __shfl_up_sync(kFullMask, incl, o);
    if (lane >= static_cast<unsigned>(o)) incl = other * incl;
  }
  __syncthreads();  // the previous call's readers are done with warp_total
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  T before = T(1);
  for (unsigned w = 0; w < warp; ++w) before *= warp_total[w];
  total = T(1);
  for (unsigned w = 0; w < nwarps; ++w) total *= warp_total[w];
  const T prev = reverse ? __shfl_down_sync(kFullMask, incl, 1) : __shfl_up_sync(kFullMask, incl, 1);
  return lane == 0 ? before : before * prev;
}

// A block per row of a [A, R] view (C == 1): prefix products left to right, then suffix products
// (starting from g, as the CPU does) right to left, tile by tile with a carry.
template <typename T>
__global__ void prod_grad_rows(T* out, const T* g, const T* x, int64_t A, int64_t R) {
  EMBER_SHARED(T, warp_total, [32]);
  for (int64_t a = blockIdx.x; a < A; a += gridDim.x) {
    const T* xa = x + a * R;
    T* oa = out + a * R;
    T carry = T(1), total;
    for (int64_t t0 = 0; t0 < R; t0 += blockDim.x) {
      const int64_t r = t0 + threadIdx.x;
      const T v = r < R ? xa[r] : T(1);
      const T before = block_exclusive_product(v, false, warp_total, total);
      if (r < R) oa[r] = carry * before;
      carry *= total;
    }
    carry = g[a];
    const int64_t tiles = (R + blockDim.x - 1) / blockDim.x;
    for (int64_t t = tiles - 1; t >= 0; --t) {
      const int64_t r = t * blockDim.x + threadIdx.x;
      const T v = r < R ? xa[r] : T(1);
      const T after = block_exclusive_product(v, true, warp_total, total);
      if (r < R) oa[r] *= carry * after;
      carry *= total;
    }
  }
}

void cuda_prod_grad(const Tensor& gi, const Tensor& g, const Tensor& x) {
  const int64_t A = x.size(0), R = x.size(1), C = x.size(2);
  if (gi.numel() == 0) return;
  DeviceGuard guard(gi.device());
  EMBER_DISPATCH_FLOAT(x.dtype(), "prod backward", [&] {
    using T = scalar_t;
    T* out = static_cast<T*>(gi.raw_data());
    const T* gp = static_cast<const T*>(g.raw_data());
    const T* xp = static_cast<const T*>(x.raw_data());
    // A thread per column unless the columns are few and long, where a block per row keeps
    // more threads busy and its loads contiguous.
    if (C == 1 && R >= 64 && A < 4096) {
      const unsigned threads = std::min<unsigned>(kThreads, static_cast<unsigned>((R + 31) / 32 * 32));
      launch(prod_grad_rows<T>, static_cast<unsigned>(std::min<int64_t>(A, kMaxBlocks)), threads, 0, kernel_stream(),
             out, gp, xp, A, R);
    } else {
      launch(prod_grad_columns<T>, blocks_for(A * C), kThreads, 0, kernel_stream(), out, gp, xp, A, R, C);
    }
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(reduce_grad_stub, CUDA, cuda_reduce_grad);
EMBER_REGISTER_KERNEL(index_grad_stub, CUDA, cuda_index_grad);
EMBER_REGISTER_KERNEL(prod_grad_stub, CUDA, cuda_prod_grad);

}  // namespace ember::cuda
