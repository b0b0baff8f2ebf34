// CUDA softmax-cross-entropy, forward and backward (core/nn_kernels.h), over logits [N, C, S]:
// one warp per sample (its C classes are S apart), the logsumexp, the target's term and label
// smoothing's sum by lane-strided loops and warp shuffles, in double as on the CPU. The forward
// also writes each sample's target weight to a scratch vector that one block then sums in a fixed
// order (the total weight is deterministic, no float atomics), and records the first
// out-of-range target and its value, which the host reports as ember::Error through
// check_deferred (core/cuda/launch.h): on a GPU without stalling the forward on a copy back.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/cuda/block_reduce.h"
#include "core/cuda/device_api.h"
#include "core/cuda/device_math.h"
#include "core/cuda/launch.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kMaxBlocks = 16384;

struct AddF {
  EMBER_DEVICE double operator()(double a, double b) const { return a + b; }
};
struct MaxF {
  EMBER_DEVICE double operator()(double a, double b) const { return a > b ? a : b; }
};

template <typename T>
EMBER_DEVICE double weight_of(const T* w, int64_t c) {
  return w ? static_cast<double>(w[c]) : 1.0;
}

// logsumexp over the C values of a sample, returned to every lane of the warp.
template <typename T>
EMBER_DEVICE double warp_lse(const T* x, int64_t C, int64_t S, unsigned lane) {
  double m = -HUGE_VAL;
  for (int64_t c = lane; c < C; c += 32) m = MaxF{}(m, static_cast<double>(x[c * S]));
  m = warp_reduce(m, MaxF{});
  if (m == HUGE_VAL || m == -HUGE_VAL) return m;  // all -inf or a +inf: the sum would be NaN
  double s = 0;
  for (int64_t c = lane; c < C; c += 32) s += d_exp(static_cast<double>(x[c * S]) - m);
  return m + d_log(warp_reduce(s, AddF{}));
}

template <typename T>
EMBER_DEVICE double warp_sum_w(const T* w, int64_t C, unsigned lane) {
  double s = 0;
  for (int64_t c = lane; c < C; c += 32) s += weight_of(w, c);
  return warp_reduce(s, AddF{});
}

template <typename T>
__global__ void ce_forward_class(T* loss, T* lse, double* sample_w, unsigned long long* bad, const T* x,
                                 const int64_t* target, const T* w, int64_t N, int64_t C, int64_t S,
                                 int64_t ignore_index, double ls) {
  const unsigned lane = threadIdx.x % 32;
  const int64_t samples = N * S;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < samples;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t n = i / S, s = i % S;
    const T* xi = x + n * C * S + s;
    const int64_t t = target[i];
    if (t == ignore_index || t < 0 || t >= C) {
      if (lane == 0) {
        loss[i] = T(0);
        lse[i] = T(0);
        sample_w[i] = 0.0;
        if (t != ignore_index) atomicMin(bad, static_cast<unsigned long long>(i));
      }
      continue;
    }
    const double l = warp_lse(xi, C, S, lane);
    const double wt = weight_of(w, t);
    double v = -wt * (static_cast<double>(xi[t * S]) - l);
    if (ls > 0) {
      double smooth = 0;
      for (int64_t c = lane; c < C; c += 32) smooth -= weight_of(w, c) * (static_cast<double>(xi[c * S]) - l);
      smooth = warp_reduce(smooth, AddF{});
      v = (1 - ls) * v + ls / static_cast<double>(C) * smooth;
    }
    if (lane == 0) {
      loss[i] = static_cast<T>(v);
      lse[i] = static_cast<T>(l);
      sample_w[i] = wt;
    }
  }
}

// bad[1] = the target of the first bad sample bad[0] (all ones: none), so that the deferred report
// (check_deferred) carries the value and the host never reads the targets.
__global__ void ce_bad_target(unsigned long long* bad, const int64_t* target) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    bad[1] = bad[0] == ~0ull ? 0ull : static_cast<unsigned long long>(target[static_cast<int64_t>(bad[0])]);
}

template <typename T>
__global__ void ce_forward_prob(T* loss, T* lse, const T* x, const T* target, const T* w, int64_t N, int64_t C,
                                int64_t S) {
  const unsigned lane = threadIdx.x % 32;
  const int64_t samples = N * S;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < samples;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t base = (i / S) * C * S + i % S;
    const double l = warp_lse(x + base, C, S, lane);
    double acc = 0;
    for (int64_t c = lane; c < C; c += 32) {
      const double tc = static_cast<double>(target[base + c * S]);
      if (tc != 0) acc -= weight_of(w, c) * tc * (static_cast<double>(x[base + c * S]) - l);
    }
    acc = warp_reduce(acc, AddF{});
    if (lane == 0) {
      loss[i] = static_cast<T>(acc);
      lse[i] = static_cast<T>(l);
    }
  }
}

// One block sums the per-sample weights in a fixed order.
template <typename T>
__global__ void sum_weights(T* total, const double* sample_w, int64_t n) {
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += sample_w[i];
  s = block_reduce(s, AddF{}, 0.0);
  if (threadIdx.x == 0) *total = static_cast<T>(s);
}

template <typename T>
__global__ void ce_backward_kernel(T* gx, T* gt, const T* gl, int64_t gs0, int64_t gs1, const T* divisor, const T* x,
                                   const T* lse, const int64_t* class_target, const T* prob_target, const T* w,
                                   int64_t N, int64_t C, int64_t S, int64_t ignore_index, double ls) {
  const unsigned lane = threadIdx.x % 32;
  const int64_t samples = N * S;
  const double inv_div = divisor ? 1.0 / static_cast<double>(*divisor) : 1.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; i < samples;
       i += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t n = i / S, s = i % S;
    const int64_t base = n * C * S + s;
    const double g = static_cast<double>(gl[n * gs0 + s * gs1]) * inv_div;
    const double l = static_cast<double>(lse[i]);
    if (prob_target) {
      double tw = 0;
      for (int64_t c = lane; c < C; c += 32) tw += weight_of(w, c) * static_cast<double>(prob_target[base + c * S]);
      tw = warp_reduce(tw, AddF{});
      for (int64_t c = lane; c < C; c += 32) {
        const double wc = weight_of(w, c);
        const double logp = static_cast<double>(x[base + c * S]) - l;
        if (gx)
          gx[base + c * S] =
              static_cast<T>(g * (tw * d_exp(logp) - wc * static_cast<double>(prob_target[base + c * S])));
        if (gt) gt[base + c * S] = static_cast<T>(-g * wc * logp);
      }
      continue;
    }
    const int64_t t = class_target[i];
    if (t == ignore_index) {
      for (int64_t c = lane; c < C; c += 32) gx[base + c * S] = T(0);
      continue;
    }
    const double wsum = ls > 0 ? warp_sum_w(w, C, lane) : 0.0;
    const double wt = weight_of(w, t);
    const double a1 = g * (1 - ls) * wt, a2 = g * ls / static_cast<double>(C);
    for (int64_t c = lane; c < C; c += 32) {
      const double p = d_exp(static_cast<double>(x[base + c * S]) - l);
      double v = a1 * (p - (c == t ? 1.0 : 0.0));
      if (ls > 0) v += a2 * (wsum * p - weight_of(w, c));
      gx[base + c * S] = static_cast<T>(v);
    }
  }
}

unsigned warp_blocks(int64_t samples) {
  return static_cast<unsigned>(std::clamp<int64_t>((samples + kWarps - 1) / kWarps, 1, kMaxBlocks));
}

template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}

void cuda_ce_forward(const Tensor& loss, const Tensor& lse, const Tensor& total_weight, const Tensor& logits,
                     const Tensor& target, const Tensor& weight, const CrossEntropyArgs& a) {
  const int64_t N = logits.size(0), C = logits.size(1), S = logits.size(2), samples = N * S;
  DeviceGuard guard(logits.device());
  EMBER_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", [&] {
    using T = scalar_t;
    T* lp = static_cast<T*>(loss.raw_data());
    T* lsep = static_cast<T*>(lse.raw_data());
    const T* x = static_cast<const T*>(logits.raw_data());
    const T* w = ptr_or_null<T>(weight);
    if (a.prob_target) {
      if (samples == 0) return;
      launch(ce_forward_prob<T>, warp_blocks(samples), kThreads, 0, kernel_stream(), lp, lsep, x,
             static_cast<const T*>(target.raw_data()), w, N, C, S);
      return;
    }
    // Scratch: per-sample weights, then the first bad sample (all ones: none) and its target.
    Tensor scratch = empty({samples + 2}, {.dtype = DType::Float64, .device = logits.device()});
    double* sw = static_cast<double*>(scratch.raw_data());
    auto* bad = reinterpret_cast<unsigned long long*>(sw + samples);
    from_blob(bad, {1}, DType::Int64, nullptr, logits.device()).fill_(-1.0);  // all ones: no bad target
    const int64_t* tp = static_cast<const int64_t*>(target.raw_data());
    if (samples > 0) {
      launch(ce_forward_class<T>, warp_blocks(samples), kThreads, 0, kernel_stream(), lp, lsep, sw, bad, x, tp, w, N, C,
             S, a.ignore_index, a.label_smoothing);
      launch(ce_bad_target, 1, 32, 0, kernel_stream(), bad, tp);
    }
    // Checked without a host synchronisation on the hot path (on a GPU the error surfaces at the
    // next device-to-host copy or synchronisation, typically the loss's item()).
    check_deferred(bad, 2 * sizeof(unsigned long long), [C, ignore = a.ignore_index](const unsigned char* bytes) {
      unsigned long long v[2];
      std::memcpy(v, bytes, sizeof v);
      if (v[0] == ~0ull) return;
      EMBER_FAIL("cross_entropy: target ", static_cast<int64_t>(v[1]), " is out of range for ", C,
                 " classes (expected 0 <= target < ", C, " or ignore_index ", ignore, ")");
    });
    launch(sum_weights<T>, 1, reduce_threads(samples), 0, kernel_stream(), static_cast<T*>(total_weight.raw_data()), sw,
           samples);
  });
}

void cuda_ce_backward(const Tensor& grad_logits, const Tensor& grad_target, const Tensor& grad_loss,
                      const Tensor& divisor, const Tensor& logits, const Tensor& lse, const Tensor& target,
                      const Tensor& weight, const CrossEntropyArgs& a) {
  const int64_t N = logits.size(0), C = logits.size(1), S = logits.size(2), samples = N * S;
  if (samples == 0) return;
  DeviceGuard guard(logits.device());
  EMBER_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_backward", [&] {
    using T = scalar_t;
    T* gx = grad_logits.defined() ? static_cast<T*>(grad_logits.raw_data()) : nullptr;
    T* gt = grad_target.defined() ? static_cast<T*>(grad_target.raw_data()) : nullptr;
    launch(ce_backward_kernel<T>, warp_blocks(samples), kThreads, 0, kernel_stream(), gx, gt,
           static_cast<const T*>(grad_loss.raw_data()), grad_loss.stride(0), grad_loss.stride(1),
           ptr_or_null<T>(divisor), static_cast<const T*>(logits.raw_data()), static_cast<const T*>(lse.raw_data()),
           a.prob_target ? nullptr : static_cast<const int64_t*>(target.raw_data()),
           a.prob_target ? static_cast<const T*>(target.raw_data()) : nullptr, ptr_or_null<T>(weight), N, C, S,
           a.ignore_index, a.label_smoothing);
  });
}

}  // namespace

EMBER_REGISTER_KERNEL(cross_entropy_forward_stub, CUDA, cuda_ce_forward);
EMBER_REGISTER_KERNEL(cross_entropy_backward_stub, CUDA, cuda_ce_backward);

}  // namespace ember::cuda
