// CUDA kernels for the fused optimizer updates and gradient clipping (layers/optim/
// fused_kernels.h): SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW (amsgrad),
// RMSprop, Adagrad, and the clip helpers. Each update is one grid-stride pass with its
// hyperparameter branches uniform across the grid; the arithmetic is the CPU kernels', term by
// term. The gradient norm reduces to per-block partials in double and then one block, in a fixed
// order (deterministic), and returns to the host.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {
namespace {

using cuda::block_reduce;
using cuda::d_fabs;
using cuda::d_pow;
using cuda::d_sqrt;
using cuda::DeviceGuard;
using cuda::kernel_stream;
using cuda::launch;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

#define EMBER_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* b, int64_t n, T lr, T wd, T mom, T damp1, T sign, bool init,
                           bool nesterov) {
  EMBER_GRID_STRIDE(i, n) {
    T d = sign * g[i];
    if (wd != T(0)) d += wd * p[i];
    if (b) {
      const T bi = init ? d : mom * b[i] + damp1 * d;
      b[i] = bi;
      d = nesterov ? d + mom * bi : bi;
    }
    p[i] -= lr * d;
  }
}

void cuda_sgd_step(const Tensor& param, const Tensor& grad, const Tensor& buf, const SgdHyper& h) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(param.device());
  EMBER_DISPATCH_FLOAT(param.dtype(), "SGD.step", [&] {
    using T = scalar_t;
    launch(sgd_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad), ptr<T>(buf), n,
           static_cast<T>(h.lr), static_cast<T>(h.weight_decay), static_cast<T>(h.momentum),
           static_cast<T>(1.0 - h.dampening), static_cast<T>(h.maximize ? -1 : 1), h.init_buffer, h.nesterov);
  });
}

template <typename T>
struct AdamScalars {
  T b1, b2, omb1, omb2, eps, wd, step_size, inv_bc2_sqrt, decay, sign;
  bool has_wd, decoupled;
};

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, AdamScalars<T> s) {
  EMBER_GRID_STRIDE(i, n) {
    T gi = s.sign * g[i];
    T pi = p[i];
    if (s.has_wd) {
      if (s.decoupled)
        pi *= s.decay;
      else
        gi += s.wd * pi;
    }
    const T mi = s.b1 * m[i] + s.omb1 * gi;
    const T vi = s.b2 * v[i] + s.omb2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    T denom_sq = vi;
    if (vmax) {
      denom_sq = cuda::dmax(vmax[i], vi);
      vmax[i] = denom_sq;
    }
    const T denom = d_sqrt(denom_sq) * s.inv_bc2_sqrt + s.eps;
    p[i] = pi - s.step_size * mi / denom;
  }
}

void cuda_adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_exp_avg_sq, const AdamHyper& h) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(param.device());
  EMBER_DISPATCH_FLOAT(param.dtype(), "Adam.step", [&] {
    using T = scalar_t;
    const AdamScalars<T> s{static_cast<T>(h.beta1),
                           static_cast<T>(h.beta2),
                           static_cast<T>(1.0 - h.beta1),
                           static_cast<T>(1.0 - h.beta2),
                           static_cast<T>(h.eps),
                           static_cast<T>(h.weight_decay),
                           static_cast<T>(h.lr / h.bias_correction1),
                           static_cast<T>(1.0 / std::sqrt(h.bias_correction2)),
                           static_cast<T>(1.0 - h.lr * h.weight_decay),
                           static_cast<T>(h.maximize ? -1 : 1),
                           h.weight_decay != 0,
                           h.decoupled_weight_decay};
    launch(adam_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad), ptr<T>(exp_avg),
           ptr<T>(exp_avg_sq), h.amsgrad ? ptr<T>(max_exp_avg_sq) : nullptr, n, s);
  });
}

template <typename T>
__global__ void rmsprop_kernel(T* p, const T* g, T* sq, T* buf, T* ga, int64_t n, T lr, T alpha, T oma, T eps, T wd,
                               T mom, T sign) {
  EMBER_GRID_STRIDE(i, n) {
    T gi = sign * g[i];
    if (wd != T(0)) gi += wd * p[i];
    const T si = alpha * sq[i] + oma * gi * gi;
    sq[i] = si;
    T avg;
    if (ga) {
      const T gai = alpha * ga[i] + oma * gi;
      ga[i] = gai;
      avg = d_sqrt(si - gai * gai) + eps;
    } else {
      avg = d_sqrt(si) + eps;
    }
    if (buf) {
      const T bi = mom * buf[i] + gi / avg;
      buf[i] = bi;
      p[i] -= lr * bi;
    } else {
      p[i] -= lr * gi / avg;
    }
  }
}

void cuda_rmsprop_step(const Tensor& param, const Tensor& grad, const Tensor& square_avg, const Tensor& momentum_buf,
                       const Tensor& grad_avg, const RmspropHyper& h) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(param.device());
  EMBER_DISPATCH_FLOAT(param.dtype(), "RMSprop.step", [&] {
    using T = scalar_t;
    launch(rmsprop_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad),
           ptr<T>(square_avg), ptr<T>(momentum_buf), h.centered ? ptr<T>(grad_avg) : nullptr, n, static_cast<T>(h.lr),
           static_cast<T>(h.alpha), static_cast<T>(1.0 - h.alpha), static_cast<T>(h.eps),
           static_cast<T>(h.weight_decay), static_cast<T>(h.momentum), static_cast<T>(h.maximize ? -1 : 1));
  });
}

template <typename T>
__global__ void adagrad_kernel(T* p, const T* g, T* sum, int64_t n, T clr, T eps, T wd, T sign) {
  EMBER_GRID_STRIDE(i, n) {
    T gi = sign * g[i];
    if (wd != T(0)) gi += wd * p[i];
    const T si = sum[i] + gi * gi;
    sum[i] = si;
    p[i] -= clr * gi / (d_sqrt(si) + eps);
  }
}

void cuda_adagrad_step(const Tensor& param, const Tensor& grad, const Tensor& state_sum, const AdagradHyper& h) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DeviceGuard guard(param.device());
  EMBER_DISPATCH_FLOAT(param.dtype(), "Adagrad.step", [&] {
    using T = scalar_t;
    launch(adagrad_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad),
           ptr<T>(state_sum), n, static_cast<T>(h.clr), static_cast<T>(h.eps), static_cast<T>(h.weight_decay),
           static_cast<T>(h.maximize ? -1 : 1));
  });
}

// ------------------------------------------------------------------ clipping
enum class NormKind : int { Max, Two, One, Power };

struct NormCombine {
  NormKind kind;
  EMBER_DEVICE double operator()(double a, double b) const {
    return kind == NormKind::Max ? cuda::max_nan(a, b) : a + b;
  }
};

template <typename T>
__global__ void norm_partials(const T* x, int64_t n, NormKind kind, double p, double* partial) {
  const NormCombine c{kind};
  double acc = 0;
  EMBER_GRID_STRIDE(i, n) {
    const double v = static_cast<double>(x[i]);
    switch (kind) {
      case NormKind::Max:
        acc = c(acc, d_fabs(v));
        break;
      case NormKind::Two:
        acc += v * v;
        break;
      case NormKind::One:
        acc += d_fabs(v);
        break;
      case NormKind::Power:
        acc += d_pow(d_fabs(v), p);
        break;
    }
  }
  acc = block_reduce(acc, c, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void norm_finish(double* partial, int64_t n, NormKind kind) {
  const NormCombine c{kind};
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = c(acc, partial[i]);
  acc = block_reduce(acc, c, 0.0);
  if (threadIdx.x == 0) partial[0] = acc;
}

double cuda_grad_norm(const Tensor& t, double p) {
  const int64_t n = t.numel();
  if (n == 0) return 0.0;
  DeviceGuard guard(t.device());
  const NormKind kind = std::isinf(p) ? NormKind::Max
                        : p == 2.0    ? NormKind::Two
                        : p == 1.0    ? NormKind::One
                                      : NormKind::Power;
  const unsigned blocks = blocks_for(n);
  Tensor scratch = empty({static_cast<int64_t>(blocks)}, {.dtype = DType::Float64, .device = t.device()});
  double* partial = static_cast<double*>(scratch.raw_data());
  EMBER_DISPATCH_FLOAT(t.dtype(), "clip_grad_norm_", [&] {
    using T = scalar_t;
    launch(norm_partials<T>, blocks, kThreads, 0, kernel_stream(), static_cast<const T*>(t.raw_data()), n, kind, p,
           partial);
  });
  launch(norm_finish, 1, kThreads, 0, kernel_stream(), partial, static_cast<int64_t>(blocks), kind);
  double result = 0;
  cuda::copy_to_host(&result, partial, sizeof result);
  return result;
}

template <typename T>
__global__ void scale_kernel(T* x, int64_t n, T f) {
  EMBER_GRID_STRIDE(i, n) {
    x[i] *= f;
  }
}

void cuda_scale(const Tensor& t, double s) {
  const int64_t n = t.numel();
  if (n == 0) return;
  DeviceGuard guard(t.device());
  EMBER_DISPATCH_FLOAT(t.dtype(), "clip_grad_norm_", [&] {
    using T = scalar_t;
    launch(scale_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), static_cast<T*>(t.raw_data()), n,
           static_cast<T>(s));
  });
}

template <typename T>
__global__ void clip_kernel(T* x, int64_t n, T lo, T hi) {
  EMBER_GRID_STRIDE(i, n) {
    const T a = x[i] < lo ? lo : x[i];  // std::max(x, lo): NaN stays
    x[i] = hi < a ? hi : a;             // std::min(a, hi)
  }
}

void cuda_clip_value(const Tensor& t, double clip) {
  const int64_t n = t.numel();
  if (n == 0) return;
  DeviceGuard guard(t.device());
  EMBER_DISPATCH_FLOAT(t.dtype(), "clip_grad_value_", [&] {
    using T = scalar_t;
    launch(clip_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), static_cast<T*>(t.raw_data()), n,
           static_cast<T>(-clip), static_cast<T>(clip));
  });
}

#undef EMBER_GRID_STRIDE

}  // namespace

EMBER_REGISTER_CUDA_KERNEL(sgd_step_stub, cuda_sgd_step);
EMBER_REGISTER_CUDA_KERNEL(adam_step_stub, cuda_adam_step);
EMBER_REGISTER_CUDA_KERNEL(rmsprop_step_stub, cuda_rmsprop_step);
EMBER_REGISTER_CUDA_KERNEL(adagrad_step_stub, cuda_adagrad_step);
EMBER_REGISTER_CUDA_KERNEL(grad_norm_stub, cuda_grad_norm);
EMBER_REGISTER_CUDA_KERNEL(scale_stub, cuda_scale);
EMBER_REGISTER_CUDA_KERNEL(clip_value_stub, cuda_clip_value);

}  // namespace ember::optim
