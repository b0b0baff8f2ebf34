// CUDA batch norm forward and backward (core/nn_kernels.h) over input [N, C, S]: one block per
// channel (grid-strided over channels), which reads the channel's N * S elements twice: once to
// reduce, once to write. Training statistics are Welford accumulations in double per thread
// (numerically stable for large means, unlike sum and sum of squares), merged across the block
// with Chan's formula in a fixed tree (warp shuffles, then one value per warp through shared
// memory), so the result is deterministic: no atomics, the same order on every run. The
// backward's two per-channel sums are double block reductions. Arithmetic follows the CPU kernel
// (core/cpu/norm_kernel.cpp): save_mean/save_invstd in double, running statistics updated with
// the unbiased variance, the mean subtracted as a head and tail in T so that x - mean keeps T's
// precision.
#include <algorithm>
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "core/element_ptr.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

constexpr int64_t kMaxBlocks = 65535;

// A Welford accumulator: count, mean and sum of squared deviations.
struct Welford {
  double n, mean, m2;
};

EMBER_DEVICE Welford merge(const Welford& a, const Welford& b) {
  const double n = a.n + b.n;
  if (n == 0) return a;
  const double d = b.mean - a.mean, fb = b.n / n;
  return Welford{n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
}

EMBER_DEVICE Welford warp_merge(Welford w) {
  EMBER_UNROLL
  for (int o = 16; o > 0; o /= 2) {
    const Welford other{__shfl_xor_sync(kFullMask, w.n, o), __shfl_xor_sync(kFullMask, w.mean, o),
                        __shfl_xor_sync(kFullMask, w.m2, o)};
    w = merge(w, other);
  }
  return w;
}

// The merge of every thread's accumulator, returned to every thread (all threads must call it;
// blockDim.x a multiple of 32).
EMBER_DEVICE Welford block_merge(Welford w) {
  EMBER_SHARED(double, part, [3][32]);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  w = warp_merge(w);
  __syncthreads();  // the previous channel's readers are done with `part`
  if (lane == 0) part[0][warp] = w.n, part[1][warp] = w.mean, part[2][warp] = w.m2;
  __syncthreads();
  w = lane < nwarps ? Welford{part[0][lane], part[1][lane], part[2][lane]} : Welford{0, 0, 0};
  return warp_merge(w);
}

struct AddD {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};

template <typename T>
struct ForwardArgs {
  T* y;
  double* save_mean;
  double* save_invstd;
  const T* x;
  const T* w;
  const T* b;
  T* rm;
  T* rv;
  int64_t N, C, S;
  bool training;
  double momentum, eps;
};

template <typename T>
__global__ void bn_forward(ForwardArgs<T> a) {
  EMBER_SHARED(double, stat, [2]);
  const int64_t M = a.N * a.S;
  for (int64_t c = blockIdx.x; c < a.C; c += gridDim.x) {
    if (a.training) {
      Welford acc{0, 0, 0};
      for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        const int64_t n = i / a.S;
        const double v = static_cast<double>(a.x[(n * a.C + c) * a.S + (i - n * a.S)]);
        acc.n += 1;
        const double d = v - acc.mean;
        acc.mean += d / acc.n;
        acc.m2 += d * (v - acc.mean);
      }
      acc = block_merge(acc);
      if (threadIdx.x == 0) {
        const double var = acc.m2 / acc.n;  // biased: the normalisation's variance (NaN when empty, as on the CPU)
        const double mean = acc.n > 0 ? acc.mean : var;
        if (a.rm) {
          const double m = a.momentum, unbias = acc.n > 1 ? acc.n / (acc.n - 1) : 1.0;
          a.rm[c] = static_cast<T>((1 - m) * static_cast<double>(a.rm[c]) + m * mean);
          a.rv[c] = static_cast<T>((1 - m) * static_cast<double>(a.rv[c]) + m * var * unbias);
        }
        stat[0] = mean, stat[1] = var;
      }
    } else if (threadIdx.x == 0) {
      stat[0] = static_cast<double>(a.rm[c]), stat[1] = static_cast<double>(a.rv[c]);
    }
    __syncthreads();
    const double mean = stat[0], invstd = 1.0 / d_sqrt(stat[1] + a.eps);
    if (threadIdx.x == 0) a.save_mean[c] = mean, a.save_invstd[c] = invstd;
    const T scale = static_cast<T>((a.w ? static_cast<double>(a.w[c]) : 1.0) * invstd);
    const T shift = a.b ? a.b[c] : T(0);
    const T head = static_cast<T>(mean), tail = static_cast<T>(mean - static_cast<double>(head));
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t n = i / a.S, at = (n * a.C + c) * a.S + (i - n * a.S);
      a.y[at] = ((a.x[at] - head) - tail) * scale + shift;
    }
    __syncthreads();  // `stat` is read by every thread before the next channel overwrites it
  }
}

template <typename T>
struct BackwardArgs {
  T* gi;
  T* gw;
  T* gb;
  const T* dy;
  const T* x;
  const T* w;
  const double* save_mean;
  const double* save_invstd;
  int64_t N, C, S;
  bool training;
};

template <typename T>
__global__ void bn_backward(BackwardArgs<T> a) {
  const int64_t M = a.N * a.S;
  for (int64_t c = blockIdx.x; c < a.C; c += gridDim.x) {
    const double mean = a.save_mean[c], inv = a.save_invstd[c];
    double sdy = 0, sdyx = 0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t n = i / a.S, at = (n * a.C + c) * a.S + (i - n * a.S);
      const double g = static_cast<double>(a.dy[at]);
      sdy += g;
      sdyx += g * (static_cast<double>(a.x[at]) - mean);
    }
    sdy = block_reduce(sdy, AddD{}, 0.0);
    sdyx = block_reduce(sdyx, AddD{}, 0.0);
    if (threadIdx.x == 0) {
      if (a.gw) a.gw[c] = static_cast<T>(sdyx * inv);
      if (a.gb) a.gb[c] = static_cast<T>(sdy);
    }
    if (!a.gi) continue;
    // dx = dy * ca + (x - mean) * cb + cc, as on the CPU.
    const double k = (a.w ? static_cast<double>(a.w[c]) : 1.0) * inv, Md = static_cast<double>(M);
    const T ca = static_cast<T>(k);
    T cb = T(0), cc = T(0);
    if (a.training && M > 0) {
      cb = static_cast<T>(-k * sdyx / Md * inv * inv);
      cc = static_cast<T>(-k * sdy / Md);
    }
    const T head = static_cast<T>(mean), tail = static_cast<T>(mean - static_cast<double>(head));
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
      const int64_t n = i / a.S, at = (n * a.C + c) * a.S + (i - n * a.S);
      a.gi[at] = a.dy[at] * ca + ((a.x[at] - head) - tail) * cb + cc;
    }
  }
}

// ------------------------------------------------------------------ host side

void cuda_bn_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& input,
                     const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                     const BatchNormArgs& args) {
  const int64_t N = input.size(0), C = input.size(1), S = input.size(2);
  if (C == 0) return;
  EMBER_CHECK(args.training || (running_mean.defined() && running_var.defined()),
              "batch_norm: evaluation needs running_mean and running_var; expected both defined");
  EMBER_CHECK(running_mean.defined() == running_var.defined(),
              "batch_norm: running_mean and running_var must be both defined or both undefined");
  DeviceGuard guard(input.device());
  EMBER_DISPATCH_FLOAT(input.dtype(), "batch_norm", [&] {
    using T = scalar_t;
    ForwardArgs<T> a{mptr<T>(out),
                     mptr<double>(save_mean),
                     mptr<double>(save_invstd),
                     cptr<T>(input),
                     cptr<T>(weight),
                     cptr<T>(bias),
                     mptr<T>(running_mean),
                     mptr<T>(running_var),
                     N,
                     C,
                     S,
                     args.training,
                     args.momentum,
                     args.eps};
    launch(bn_forward<T>, static_cast<unsigned>(std::min(C, kMaxBlocks)), reduce_threads(N * S), 0, kernel_stream(), a);
  });
}

void cuda_bn_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                      const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
                      const Tensor& save_invstd, bool training) {
  const int64_t N = input.size(0), C = input.size(1), S = input.size(2);
  if (C == 0) return;
  DeviceGuard guard(input.device());
  EMBER_DISPATCH_FLOAT(input.dtype(), "batch_norm_backward", [&] {
    using T = scalar_t;
    BackwardArgs<T> a{mptr<T>(grad_input),
                      mptr<T>(grad_weight),
                      mptr<T>(grad_bias),
                      cptr<T>(grad_out),
                      cptr<T>(input),
                      cptr<T>(weight),
                      cptr<double>(save_mean),
                      cptr<double>(save_invstd),
                      N,
                      C,
                      S,
                      training};
    launch(bn_backward<T>, static_cast<unsigned>(std::min(C, kMaxBlocks)), reduce_threads(N * S), 0, kernel_stream(),
           a);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(batch_norm_forward_stub, CUDA, cuda_bn_forward, BatchNorm);
EMBER_REGISTER_KERNEL(batch_norm_backward_stub, CUDA, cuda_bn_backward, BatchNorm);

}  // namespace ember::cuda
