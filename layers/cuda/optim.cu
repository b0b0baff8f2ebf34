// CUDA kernels for the fused optimizer updates and gradient clipping (layers/optim/
// fused_kernels.h): SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW (amsgrad),
// RMSprop, Adagrad, and the clip helpers. Each update is one grid-stride pass with its
// hyperparameter branches uniform across the grid; the arithmetic is the CPU kernels', term by
// term. A step its device decides on (DeviceStep, for GradScaler) reads the skip flag and the step
// count in the kernel, so the host never waits: every thread returns at once on a skip, the
// step-dependent terms are computed per thread from the device's count, and a one-thread launch
// behind the update advances the count (advancing inside the update would race with the blocks
// that still read it). The gradient norm reduces to per-block partials in double and then one block, in a fixed
// order (deterministic), and returns to the host. Adam and the gradient norm also have
// multi-tensor forms (many tensors per launch, one host synchronisation for a whole model's norm).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

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

// The device side of a DeviceStep: both null for an ordinary step.
struct StepOnDevice {
  const double* skip = nullptr;
  double* step = nullptr;
};

StepOnDevice on_device(const DeviceStep& d, const Tensor& param) {
  if (!d.defined()) return {};
  for (const Tensor* t : {&d.found_inf, &d.step})
    EMBER_CHECK(t->defined() && t->dtype() == DType::Float64 && t->numel() == 1 && t->device() == param.device(),
                "optimizer step decided on the device: its skip flag and step count must be one-element float64 "
                "tensors on the parameter's device ",
                param.device());
  return {static_cast<const double*>(d.found_inf.raw_data()), static_cast<double*>(d.step.raw_data())};
}

// Each thread's verdict on a device-decided step: true when the step is skipped (or false, with no
// flag at all).
EMBER_DEVICE bool skipped(const StepOnDevice& d) {
  return d.skip != nullptr && *d.skip != 0.0;
}

// Step counts advanced behind the updates that read them, kStepsPerLaunch per launch.
constexpr int kStepsPerLaunch = 24;
struct StepCounts {
  double* step[kStepsPerLaunch];
};

__global__ void advance_steps(StepCounts c, int n, const double* skip) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n && *skip == 0.0) c.step[i][0] += 1.0;
}

void advance_counts(const std::vector<double*>& steps, const double* skip) {
  for (size_t begin = 0; begin < steps.size(); begin += kStepsPerLaunch) {
    StepCounts c{};
    const int n = static_cast<int>(std::min<size_t>(kStepsPerLaunch, steps.size() - begin));
    for (int i = 0; i < n; ++i) c.step[i] = steps[begin + i];
    launch(advance_steps, 1, 32, 0, kernel_stream(), c, n, skip);
  }
}

#define EMBER_GRID_STRIDE(i, n)                                                          \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void sgd_kernel(T* p, const T* g, T* b, int64_t n, T lr, T wd, T mom, T damp1, T sign, bool init,
                           bool nesterov, StepOnDevice ds) {
  if (skipped(ds)) return;
  if (ds.step) init = *ds.step == 0.0;
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
  if (n == 0 && !h.device.defined()) return;  // a device-decided step still counts
  DeviceGuard guard(param.device());
  const StepOnDevice ds = on_device(h.device, param);
  EMBER_DISPATCH_FLOAT(param.dtype(), "SGD.step", [&] {
    using T = scalar_t;
    launch(sgd_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad), ptr<T>(buf), n,
           static_cast<T>(h.lr), static_cast<T>(h.weight_decay), static_cast<T>(h.momentum),
           static_cast<T>(1.0 - h.dampening), static_cast<T>(h.maximize ? -1 : 1), h.init_buffer, h.nesterov, ds);
  });
  if (ds.step) advance_counts({ds.step}, ds.skip);
}

template <typename T>
struct AdamScalars {
  T b1, b2, omb1, omb2, eps, wd, step_size, inv_bc2_sqrt, decay, sign;
  bool has_wd, decoupled;
  double lr, beta1, beta2;  // for step_size and inv_bc2_sqrt from a count on the device
};

// step_size and inv_bc2_sqrt of step t (counted from 1), as adam_scalars computes them on the host.
template <typename T>
EMBER_DEVICE void adam_terms_at(AdamScalars<T>& s, double t) {
  s.step_size = static_cast<T>(s.lr / (1.0 - d_pow(s.beta1, t)));
  s.inv_bc2_sqrt = static_cast<T>(1.0 / d_sqrt(1.0 - d_pow(s.beta2, t)));
}

// One element of the Adam update: the single-tensor and the multi-tensor kernels share it, so
// both give the same bits.
template <typename T>
EMBER_DEVICE void adam_update(int64_t i, T* p, const T* g, T* m, T* v, T* vmax, const AdamScalars<T>& s) {
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

template <typename T>
__global__ void adam_kernel(T* p, const T* g, T* m, T* v, T* vmax, int64_t n, AdamScalars<T> s, StepOnDevice ds) {
  if (skipped(ds)) return;
  if (ds.step) adam_terms_at(s, *ds.step + 1.0);
  EMBER_GRID_STRIDE(i, n) {
    adam_update(i, p, g, m, v, vmax, s);
  }
}

// The scalars of one step; step_size and inv_bc2_sqrt from the given bias corrections.
template <typename T>
AdamScalars<T> adam_scalars(const AdamHyper& h, double bias_correction1, double bias_correction2) {
  return AdamScalars<T>{static_cast<T>(h.beta1),
                        static_cast<T>(h.beta2),
                        static_cast<T>(1.0 - h.beta1),
                        static_cast<T>(1.0 - h.beta2),
                        static_cast<T>(h.eps),
                        static_cast<T>(h.weight_decay),
                        static_cast<T>(h.lr / bias_correction1),
                        static_cast<T>(1.0 / std::sqrt(bias_correction2)),
                        static_cast<T>(1.0 - h.lr * h.weight_decay),
                        static_cast<T>(h.maximize ? -1 : 1),
                        h.weight_decay != 0,
                        h.decoupled_weight_decay,
                        h.lr,
                        h.beta1,
                        h.beta2};
}

void cuda_adam_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                    const Tensor& max_exp_avg_sq, const AdamHyper& h) {
  const int64_t n = param.numel();
  if (n == 0 && !h.device.defined()) return;  // a device-decided step still counts
  DeviceGuard guard(param.device());
  const StepOnDevice ds = on_device(h.device, param);
  EMBER_DISPATCH_FLOAT(param.dtype(), "Adam.step", [&] {
    using T = scalar_t;
    const AdamScalars<T> s = adam_scalars<T>(h, h.bias_correction1, h.bias_correction2);
    launch(adam_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad), ptr<T>(exp_avg),
           ptr<T>(exp_avg_sq), h.amsgrad ? ptr<T>(max_exp_avg_sq) : nullptr, n, s, ds);
  });
  if (ds.step) advance_counts({ds.step}, ds.skip);
}

// ------------------------------------------------------------------ multi-tensor launches
// Many tensors per launch (a model's parameters in a few launches, not one each): the tensors'
// pointers and sizes travel in the kernel's parameters (kMtTensors of them, under the 4 KiB
// parameter limit), and each block handles one chunk of kMtChunk elements of one tensor, named
// by the block's entries of a block-to-(tensor, chunk) table. Built on the host by mt_walk; a
// launch is issued whenever the tensor slots or the block table are full (a tensor that does not
// fit continues in the next launch).
constexpr int kMtTensors = 24;
constexpr int kMtBlocks = 320;
constexpr int64_t kMtChunk = 8192;  // 32 elements per thread

struct MtTable {
  int64_t n[kMtTensors];
  unsigned char block_tensor[kMtBlocks];
  int32_t block_chunk[kMtBlocks];
};

// The elements [begin, end) of a chunk of tensor t.
EMBER_DEVICE void mt_range(const MtTable& tab, int& t, int64_t& begin, int64_t& end) {
  t = tab.block_tensor[blockIdx.x];
  begin = static_cast<int64_t>(tab.block_chunk[blockIdx.x]) * kMtChunk;
  end = begin + kMtChunk < tab.n[t] ? begin + kMtChunk : tab.n[t];
}

template <typename T>
struct AdamMtArgs {
  T* p[kMtTensors];
  const T* g[kMtTensors];
  T* m[kMtTensors];
  T* v[kMtTensors];
  T* vmax[kMtTensors];
  T step_size[kMtTensors];
  T inv_bc2_sqrt[kMtTensors];
  const double* step[kMtTensors];  // a DeviceStep's counts (null for an ordinary step)
  MtTable tab;
};

template <typename T>
__global__ void adam_multi_kernel(AdamMtArgs<T> a, AdamScalars<T> s, const double* skip) {
  if (skip != nullptr && *skip != 0.0) return;
  int t;
  int64_t begin, end;
  mt_range(a.tab, t, begin, end);
  s.step_size = a.step_size[t];
  s.inv_bc2_sqrt = a.inv_bc2_sqrt[t];
  if (a.step[t] != nullptr) adam_terms_at(s, *a.step[t] + 1.0);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    adam_update(i, a.p[t], a.g[t], a.m[t], a.v[t], a.vmax[t], s);
}

// Walks `count` tensors of sizes size(i), filling the table's slots through set(slot, i) and
// issuing launch_table(blocks) whenever the tensor slots or the block table are full, and once at
// the end. A tensor whose chunks do not all fit continues in the next launch, in slot 0.
template <typename Size, typename Set, typename Launch>
void mt_walk(size_t count, MtTable& tab, const Size& size, const Set& set, const Launch& launch_table) {
  int tensors = 0, blocks = 0;
  auto flush = [&] {
    if (blocks > 0) launch_table(blocks);
    tensors = blocks = 0;
  };
  auto take_slot = [&](size_t i, int64_t n) {
    const int slot = tensors++;
    set(slot, i);
    tab.n[slot] = n;
    return slot;
  };
  for (size_t i = 0; i < count; ++i) {
    const int64_t n = size(i);
    if (n == 0) continue;
    if (tensors == kMtTensors) flush();
    int slot = take_slot(i, n);
    const int64_t chunks = (n + kMtChunk - 1) / kMtChunk;
    for (int64_t c = 0; c < chunks; ++c) {
      if (blocks == kMtBlocks) {
        flush();
        slot = take_slot(i, n);
      }
      tab.block_tensor[blocks] = static_cast<unsigned char>(slot);
      tab.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
    }
  }
  flush();
}

void cuda_adam_multi_step(const std::vector<AdamTensors>& ts, const AdamHyper& h) {
  if (ts.empty()) return;
  const Tensor& first = ts.front().param;
  for (const AdamTensors& e : ts)
    EMBER_CHECK(e.param.device() == first.device() && e.param.dtype() == first.dtype(),
                "Adam.step (multi-tensor): every parameter must share the first one's device ", first.device(),
                " and dtype ", dtype_name(first.dtype()), ", got ", e.param.device(), " ", dtype_name(e.param.dtype()));
  DeviceGuard guard(first.device());
  const double* skip = nullptr;
  std::vector<double*> steps;
  for (const AdamTensors& e : ts) {
    const StepOnDevice ds =
        on_device(h.device.defined() ? DeviceStep{h.device.found_inf, e.step} : DeviceStep{}, e.param);
    skip = ds.skip;
    if (ds.step) steps.push_back(ds.step);
  }
  EMBER_DISPATCH_FLOAT(first.dtype(), "Adam.step", [&] {
    using T = scalar_t;
    const AdamScalars<T> s = adam_scalars<T>(h, 1.0, 1.0);  // per-tensor step sizes in the table
    AdamMtArgs<T> a{};
    mt_walk(
        ts.size(), a.tab, [&](size_t i) { return ts[i].param.numel(); },
        [&](int slot, size_t i) {
          const AdamTensors& e = ts[i];
          const AdamScalars<T> own = adam_scalars<T>(h, e.bias_correction1, e.bias_correction2);
          a.p[slot] = ptr<T>(e.param);
          a.g[slot] = ptr<T>(e.grad);
          a.m[slot] = ptr<T>(e.exp_avg);
          a.v[slot] = ptr<T>(e.exp_avg_sq);
          a.vmax[slot] = h.amsgrad ? ptr<T>(e.max_exp_avg_sq) : nullptr;
          a.step_size[slot] = own.step_size;
          a.inv_bc2_sqrt[slot] = own.inv_bc2_sqrt;
          a.step[slot] = skip != nullptr ? static_cast<const double*>(e.step.raw_data()) : nullptr;
        },
        [&](int blocks) {
          launch(adam_multi_kernel<T>, static_cast<unsigned>(blocks), kThreads, 0, kernel_stream(), a, s, skip);
        });
  });
  // Once per tensor, after every launch that reads its count (a tensor may span two launches).
  if (skip != nullptr) advance_counts(steps, skip);
}

template <typename T>
__global__ void rmsprop_kernel(T* p, const T* g, T* sq, T* buf, T* ga, int64_t n, T lr, T alpha, T oma, T eps, T wd,
                               T mom, T sign, StepOnDevice ds) {
  if (skipped(ds)) return;
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
  if (n == 0 && !h.device.defined()) return;  // a device-decided step still counts
  DeviceGuard guard(param.device());
  const StepOnDevice ds = on_device(h.device, param);
  EMBER_DISPATCH_FLOAT(param.dtype(), "RMSprop.step", [&] {
    using T = scalar_t;
    launch(rmsprop_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad),
           ptr<T>(square_avg), ptr<T>(momentum_buf), h.centered ? ptr<T>(grad_avg) : nullptr, n, static_cast<T>(h.lr),
           static_cast<T>(h.alpha), static_cast<T>(1.0 - h.alpha), static_cast<T>(h.eps),
           static_cast<T>(h.weight_decay), static_cast<T>(h.momentum), static_cast<T>(h.maximize ? -1 : 1), ds);
  });
  if (ds.step) advance_counts({ds.step}, ds.skip);
}

template <typename T>
__global__ void adagrad_kernel(T* p, const T* g, T* sum, int64_t n, T clr, T eps, T wd, T sign, StepOnDevice ds,
                               double lr, double lr_decay) {
  if (skipped(ds)) return;
  if (ds.step) clr = static_cast<T>(lr / (1.0 + *ds.step * lr_decay));  // the host's formula at step + 1
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
  if (n == 0 && !h.device.defined()) return;  // a device-decided step still counts
  DeviceGuard guard(param.device());
  const StepOnDevice ds = on_device(h.device, param);
  EMBER_DISPATCH_FLOAT(param.dtype(), "Adagrad.step", [&] {
    using T = scalar_t;
    launch(adagrad_kernel<T>, blocks_for(n), kThreads, 0, kernel_stream(), ptr<T>(param), ptr<T>(grad),
           ptr<T>(state_sum), n, static_cast<T>(h.clr), static_cast<T>(h.eps), static_cast<T>(h.weight_decay),
           static_cast<T>(h.maximize ? -1 : 1), ds, h.lr, h.lr_decay);
  });
  if (ds.step) advance_counts({ds.step}, ds.skip);
}

// ------------------------------------------------------------------ clipping
enum class NormKind : int { Max, Two, One, Power };

struct NormCombine {
  NormKind kind;
  EMBER_DEVICE double operator()(double a, double b) const {
    return kind == NormKind::Max ? cuda::max_nan(a, b) : a + b;
  }
};

// One element's share of a norm: the running max of |v| (inf-norm) or the running sum of |v|^p.
EMBER_DEVICE double norm_step(double acc, double v, NormKind kind, double p, const NormCombine& c) {
  switch (kind) {
    case NormKind::Max:
      return c(acc, d_fabs(v));
    case NormKind::Two:
      return acc + v * v;
    case NormKind::One:
      return acc + d_fabs(v);
    case NormKind::Power:
      return acc + d_pow(d_fabs(v), p);
  }
  return acc;
}

NormKind norm_kind(double p) {
  return std::isinf(p) ? NormKind::Max : p == 2.0 ? NormKind::Two : p == 1.0 ? NormKind::One : NormKind::Power;
}

template <typename T>
__global__ void norm_partials(const T* x, int64_t n, NormKind kind, double p, double* partial) {
  const NormCombine c{kind};
  double acc = 0;
  EMBER_GRID_STRIDE(i, n) {
    acc = norm_step(acc, static_cast<double>(x[i]), kind, p, c);
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
  const NormKind kind = norm_kind(p);
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

// The gradient norm over many tensors: stage one is a multi-tensor launch (block b: the partial
// of one chunk, into partial[base + b]), stage two is norm_finish over every chunk's partial, in
// chunk order: deterministic, and one copy back for the whole model.
template <typename T>
struct NormMtArgs {
  const T* x[kMtTensors];
  MtTable tab;
};

template <typename T>
__global__ void norm_multi_partials(NormMtArgs<T> a, NormKind kind, double p, double* partial) {
  const NormCombine c{kind};
  int t;
  int64_t begin, end;
  mt_range(a.tab, t, begin, end);
  const T* x = a.x[t];
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    acc = norm_step(acc, static_cast<double>(x[i]), kind, p, c);
  }
  acc = block_reduce(acc, c, 0.0);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

double cuda_grad_norm_total(const std::vector<Tensor>& ts, double p) {
  int64_t chunks = 0;
  for (const Tensor& t : ts) chunks += (t.numel() + kMtChunk - 1) / kMtChunk;
  if (chunks == 0) return 0.0;
  const Device dev = ts.front().device();
  for (const Tensor& t : ts)
    EMBER_CHECK(t.device() == dev, "clip_grad_norm_: every gradient must be on ", dev, ", got one on ", t.device());
  DeviceGuard guard(dev);
  const NormKind kind = norm_kind(p);
  Tensor scratch = empty({chunks}, {.dtype = DType::Float64, .device = dev});
  double* partial = static_cast<double*>(scratch.raw_data());
  int64_t done = 0;
  // Float32 tensors first, then float64 (one kernel per dtype); the order is fixed by the list.
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<const Tensor*> of;
    for (const Tensor& t : ts) {
      EMBER_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::Float64,
                  "clip_grad_norm_: gradients must be float32 or float64 on CUDA, got ", dtype_name(t.dtype()));
      if (t.dtype() == dt) of.push_back(&t);
    }
    EMBER_DISPATCH_FLOAT(dt, "clip_grad_norm_", [&] {
      using T = scalar_t;
      NormMtArgs<T> a{};
      mt_walk(
          of.size(), a.tab, [&](size_t i) { return of[i]->numel(); },
          [&](int slot, size_t i) { a.x[slot] = static_cast<const T*>(of[i]->raw_data()); },
          [&](int blocks) {
            launch(norm_multi_partials<T>, static_cast<unsigned>(blocks), kThreads, 0, kernel_stream(), a, kind, p,
                   partial + done);
            done += blocks;
          });
    });
  }
  launch(norm_finish, 1, kThreads, 0, kernel_stream(), partial, chunks, kind);
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

// GradScaler's unscale_ over many gradients per launch: x *= 1 / scale, and the flag set when an
// element was not finite (inf * 0 and NaN * 0 are NaN: one test per thread, not per element;
// every writer writes the same 1).
template <typename T>
struct UnscaleMtArgs {
  T* x[kMtTensors];
  MtTable tab;
};

template <typename T>
__global__ void unscale_multi_kernel(UnscaleMtArgs<T> a, const double* scale, double* found_inf) {
  int t;
  int64_t begin, end;
  mt_range(a.tab, t, begin, end);
  const T f = static_cast<T>(1.0 / *scale);
  T* x = a.x[t];
  T probe = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const T v = x[i];
    probe += v * T(0);
    x[i] = v * f;
  }
  if (probe != probe) *found_inf = 1.0;
}

void cuda_unscale(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf) {
  check_unscale_args(grads, scale, found_inf, scale.device());
  DeviceGuard guard(scale.device());
  const double* s = static_cast<const double*>(scale.raw_data());
  double* found = static_cast<double*>(found_inf.raw_data());
  for (DType dt : {DType::Float32, DType::Float64}) {
    std::vector<const Tensor*> of;
    for (const Tensor& g : grads)
      if (g.dtype() == dt) of.push_back(&g);
    EMBER_DISPATCH_FLOAT(dt, "GradScaler.unscale_", [&] {
      using T = scalar_t;
      UnscaleMtArgs<T> a{};
      mt_walk(
          of.size(), a.tab, [&](size_t i) { return of[i]->numel(); },
          [&](int slot, size_t i) { a.x[slot] = static_cast<T*>(of[i]->raw_data()); },
          [&](int blocks) {
            launch(unscale_multi_kernel<T>, static_cast<unsigned>(blocks), kThreads, 0, kernel_stream(), a, s, found);
          });
    });
  }
}

// GradScaler's update(): one thread, next_scale (fused_kernels.h) on the device's values.
__global__ void update_scale_kernel(double* scale, double* tracker, const double* found_inf, ScaleUpdate u) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    next_scale(*scale, *tracker, *found_inf, u.growth_factor, u.backoff_factor, static_cast<double>(u.growth_interval));
}

void cuda_update_scale(const Tensor& scale, const Tensor& tracker, const Tensor& found_inf, const ScaleUpdate& u) {
  check_unscale_args({}, scale, found_inf, scale.device());
  check_unscale_args({}, tracker, found_inf, scale.device());
  DeviceGuard guard(scale.device());
  launch(update_scale_kernel, 1, 32, 0, kernel_stream(), static_cast<double*>(scale.raw_data()),
         static_cast<double*>(tracker.raw_data()), static_cast<const double*>(found_inf.raw_data()), u);
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

EMBER_REGISTER_KERNEL(sgd_step_stub, CUDA, cuda_sgd_step);
EMBER_REGISTER_KERNEL(adam_step_stub, CUDA, cuda_adam_step);
EMBER_REGISTER_KERNEL(rmsprop_step_stub, CUDA, cuda_rmsprop_step);
EMBER_REGISTER_KERNEL(adagrad_step_stub, CUDA, cuda_adagrad_step);
EMBER_REGISTER_KERNEL(adam_multi_step_stub, CUDA, cuda_adam_multi_step);
EMBER_REGISTER_KERNEL(grad_norm_stub, CUDA, cuda_grad_norm);
EMBER_REGISTER_KERNEL(grad_norm_total_stub, CUDA, cuda_grad_norm_total);
EMBER_REGISTER_KERNEL(scale_stub, CUDA, cuda_scale);
EMBER_REGISTER_KERNEL(unscale_stub, CUDA, cuda_unscale);
EMBER_REGISTER_KERNEL(update_scale_stub, CUDA, cuda_update_scale);
EMBER_REGISTER_KERNEL(clip_value_stub, CUDA, cuda_clip_value);

}  // namespace ember::optim
