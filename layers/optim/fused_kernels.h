// Kernel interface for the fused optimizer updates and gradient-clipping passes. Each update is
// one pass over a parameter with all of its math inline (weight decay, moments, bias correction,
// the write back), rather than a chain of tensor ops. The optimizers in this folder compute the
// per-step scalars (bias corrections, decayed learning rates) and call `stub(device)(...)`; the
// CPU kernels in cpu/fused_kernels.cpp register themselves, and a CUDA backend registers into the
// same stubs. Every tensor argument is contiguous, of the parameter's dtype (float32/float64) and
// shape; optional state is passed undefined when unused.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember::optim {

struct SgdHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  bool init_buffer = false;  // first step: the momentum buffer becomes the gradient (no dampening)
};
// momentum_buf: undefined when momentum == 0.
using SgdStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h);

struct AdamHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^step
  bool decoupled_weight_decay = false;                // AdamW
  bool amsgrad = false, maximize = false;
};
// max_exp_avg_sq: undefined unless amsgrad.
using AdamStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamHyper& h);

struct RmspropHyper {
  double lr = 0, alpha = 0, eps = 0, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
};
// momentum_buf: undefined when momentum == 0; grad_avg: undefined unless centered.
using RmspropStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                           const Tensor& momentum_buf, const Tensor& grad_avg, const RmspropHyper& h);

struct AdagradHyper {
  double clr = 0;  // lr / (1 + (step - 1) * lr_decay)
  double weight_decay = 0, eps = 0;
  bool maximize = false;
};
using AdagradStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& state_sum, const AdagradHyper& h);

// One parameter's share of a multi-tensor Adam step: its tensors and its own bias corrections
// (each parameter counts its own steps). max_exp_avg_sq: undefined unless amsgrad.
struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  double bias_correction1 = 1, bias_correction2 = 1;
};
// The Adam step of many parameters of one device at once (h's own bias corrections are unused):
// a few launches for a whole model instead of one per tensor. Device backends only (CUDA); the
// CPU steps parameter by parameter through adam_step_stub.
using AdamMultiStepFn = void(const std::vector<AdamTensors>& ts, const AdamHyper& h);

// sum(|x|^p) over the tensor, or max(|x|) when p is infinite; any float dtype, contiguous.
using GradNormFn = double(const Tensor& t, double p);
// The same over many tensors of one device together (sum of their sums, max of their maxima),
// computed on the device with one synchronisation. Device backends only (CUDA).
using GradNormTotalFn = double(const std::vector<Tensor>& ts, double p);
// x *= s in place.
using ScaleFn = void(const Tensor& t, double s);
// x = clamp(x, -clip, clip) in place.
using ClipValueFn = void(const Tensor& t, double clip);

EMBER_DECLARE_STUB(sgd_step_stub, SgdStepFn);
EMBER_DECLARE_STUB(adam_step_stub, AdamStepFn);
EMBER_DECLARE_STUB(rmsprop_step_stub, RmspropStepFn);
EMBER_DECLARE_STUB(adagrad_step_stub, AdagradStepFn);
EMBER_DECLARE_STUB(adam_multi_step_stub, AdamMultiStepFn);
EMBER_DECLARE_STUB(grad_norm_stub, GradNormFn);
EMBER_DECLARE_STUB(grad_norm_total_stub, GradNormTotalFn);
EMBER_DECLARE_STUB(scale_stub, ScaleFn);
EMBER_DECLARE_STUB(clip_value_stub, ClipValueFn);

}  // namespace ember::optim
