// Batch norm on CUDA: the choosers registered as batch_norm_forward_stub's and
// batch_norm_backward_stub's CUDA kernels, and cuDNN (spatial mode, over N and the spatial dims
// per channel) as the vendor implementation of training-mode batch norm. Ember keeps the saved
// mean and 1/sqrt(var + eps) in float64; cuDNN keeps them in the input's dtype, so for float32 they
// pass through small float buffers and the device cast kernel. Eval mode, and eps below cuDNN's
// minimum, run the native kernels only. Ran on a lent H200 (2026-12-04: the op table's cuda_vendor
// rows); scripts/gpu-check.sh checks it against the CPU each time.
#include "core/cuda/cudnn_common.h"

#if EMBER_WITH_CUDNN

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // see cudnn_common.h

#include <string>

#include "core/autograd/grad_mode.h"
#include "core/copy.h"
#include "core/cuda/cuda_stream.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/native_kernels.h"
#include "core/kernel_choice.h"
#include "core/nn_kernels.h"

namespace ember::cuda {
namespace {

constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

struct BnShape {
  int64_t N = 0, C = 0, S = 0;
};

BnShape shape_of(const Tensor& input) {
  BnShape s;
  s.N = input.size(0);
  s.C = input.size(1);
  s.S = s.N * s.C == 0 ? 0 : input.numel() / (s.N * s.C);
  return s;
}

std::string bn_key(const char* pass, const Tensor& input) {
  const BnShape s = shape_of(input);
  return ::ember::detail::concat(pass, " ", dtype_name(input.dtype()), " N=", s.N, " C=", s.C, " S=", s.S);
}

bool cudnn_can(const Tensor& input, bool training, double eps) {
  return training && (input.dtype() == DType::Float32 || input.dtype() == DType::Float64) && input.numel() > 0 &&
         eps >= CUDNN_BN_MIN_EPSILON;
}

// The tensor itself when defined, else a constant [C] of `value` on its device.
Tensor or_const(const Tensor& t, int64_t C, double value, const Tensor& like) {
  if (t.defined()) return t;
  Tensor c = empty({C}, {like.dtype(), like.device()});
  c.fill_(value);
  return c;
}

// A buffer in the input's dtype for a float64 statistic; the statistic itself for float64 input.
Tensor stat_buffer(const Tensor& stat, DType t) {
  return t == DType::Float64 ? stat : empty(stat.shape(), {t, stat.device()});
}

struct Descs {
  TensorDesc x, param;
};

void describe(Descs& d, const Tensor& input) {
  const BnShape s = shape_of(input);
  set_nchw(d.x, input.dtype(), s.N, s.C, s.S, 1);
  EMBER_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d.param, d.x, kMode));
}

struct Scalars {
  double d0 = 0.0, d1 = 1.0;
  float f0 = 0.0f, f1 = 1.0f;
  const void* one(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d1) : &f1; }
  const void* zero(DType t) const { return t == DType::Float64 ? static_cast<const void*>(&d0) : &f0; }
};

void cudnn_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& input,
                   const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                   const BatchNormArgs& a) {
  NoGradGuard no_grad;
  const int dev = input.device().index;
  DeviceGuard guard(input.device());
  const DType t = input.dtype();
  const int64_t C = input.size(1);
  Descs d;
  describe(d, input);
  const Tensor w = or_const(weight, C, 1.0, input), b = or_const(bias, C, 0.0, input);
  const Tensor mean = stat_buffer(save_mean, t), invstd = stat_buffer(save_invstd, t);
  const bool running = running_mean.defined() && running_var.defined();
  Scalars s;
  EMBER_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cudnn_handle(dev), kMode, s.one(t), s.zero(t), d.x, input.raw_data(), d.x, out.raw_data(), d.param, w.raw_data(),
      b.raw_data(), a.momentum, running ? running_mean.raw_data() : nullptr, running ? running_var.raw_data() : nullptr,
      a.eps, mean.raw_data(), invstd.raw_data()));
  if (t != DType::Float64) {
    copy_stub(save_mean.device())(save_mean, mean);
    copy_stub(save_invstd.device())(save_invstd, invstd);
  }
}

void cudnn_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
                    const Tensor& save_invstd) {
  NoGradGuard no_grad;
  const int dev = input.device().index;
  DeviceGuard guard(input.device());
  const DType t = input.dtype();
  const int64_t C = input.size(1);
  Descs d;
  describe(d, input);
  const Tensor w = or_const(weight, C, 1.0, input);
  // cuDNN writes all three gradients; unwanted ones go to scratch.
  const Tensor gi = grad_input.defined() ? grad_input : empty(input.shape(), {t, input.device()});
  const Tensor gw = grad_weight.defined() ? grad_weight : empty({C}, {t, input.device()});
  const Tensor gb = grad_bias.defined() ? grad_bias : empty({C}, {t, input.device()});
  Tensor mean = save_mean, invstd = save_invstd;
  if (t != DType::Float64) {
    mean = empty({C}, {t, input.device()});
    invstd = empty({C}, {t, input.device()});
    copy_stub(mean.device())(mean, save_mean);
    copy_stub(invstd.device())(invstd, save_invstd);
  }
  Scalars s;
  // epsilon is unused when the saved statistics are given; any valid value will do.
  EMBER_CUDNN_CHECK(cudnnBatchNormalizationBackward(cudnn_handle(dev), kMode, s.one(t), s.zero(t), s.one(t), s.zero(t),
                                                    d.x, input.raw_data(), d.x, grad_out.raw_data(), d.x, gi.raw_data(),
                                                    d.param, w.raw_data(), gw.raw_data(), gb.raw_data(),
                                                    CUDNN_BN_MIN_EPSILON, mean.raw_data(), invstd.raw_data()));
}

KernelTimer timer_for(int dev) {
  return [dev](const std::function<void()>& fn) { return time_on_stream(dev, fn); };
}

void cuda_bn_forward(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& input,
                     const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                     const BatchNormArgs& a) {
  DeviceGuard guard(input.device());
  const auto native = native_kernel(batch_norm_forward_stub, KernelFamily::BatchNorm);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] {
                        native.fn(out, save_mean, save_invstd, input, weight, bias, running_mean, running_var, a);
                      }};
  KernelCandidate ven{cudnn_can(input, a.training, a.eps), true, [&] {
                        cudnn_forward(out, save_mean, save_invstd, input, weight, bias, running_mean, running_var, a);
                      }};
  // Updating running statistics twice would apply the momentum twice: such calls are not timed.
  const bool may_time = !running_mean.defined() && !running_var.defined();
  kernel_selector().run(KernelFamily::BatchNorm, bn_key("fwd", input), nat, ven, timer_for(input.device().index),
                        may_time);
}

void cuda_bn_backward(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                      const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
                      const Tensor& save_invstd, bool training) {
  DeviceGuard guard(input.device());
  const auto native = native_kernel(batch_norm_backward_stub, KernelFamily::BatchNorm);
  KernelCandidate nat{native.fn != nullptr, native.deterministic, [&] {
                        native.fn(grad_input, grad_weight, grad_bias, grad_out, input, weight, save_mean, save_invstd,
                                  training);
                      }};
  KernelCandidate ven{
      cudnn_can(input, training, CUDNN_BN_MIN_EPSILON), true,
      [&] { cudnn_backward(grad_input, grad_weight, grad_bias, grad_out, input, weight, save_mean, save_invstd); }};
  kernel_selector().run(KernelFamily::BatchNorm, bn_key("bwd", input), nat, ven, timer_for(input.device().index));
}

}  // namespace

EMBER_REGISTER_KERNEL(batch_norm_forward_stub, CUDA, cuda_bn_forward);
EMBER_REGISTER_KERNEL(batch_norm_backward_stub, CUDA, cuda_bn_backward);

namespace {
[[maybe_unused]] const bool vendor_registered = [] {
  register_vendor(KernelFamily::BatchNorm);
  return true;
}();
}  // namespace

}  // namespace ember::cuda

#endif  // EMBER_WITH_CUDNN
