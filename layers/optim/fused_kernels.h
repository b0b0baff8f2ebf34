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
#include "core/host_device.h"
#include "core/tensor.h"

namespace ember::optim {

// A step its device decides on (GradScaler with gradients on a GPU, so that the host never waits):
// `found_inf` is a one-element float64 on the parameter's device, and a nonzero value there makes
// the kernel change nothing; `step` (one-element float64, same device) is the parameter's step
// count before this step, read in place of the host's count wherever the update depends on it
// (Adam's bias corrections, Adagrad's learning-rate decay, SGD's first momentum step) and advanced
// by the call unless the step is skipped. Both undefined: an ordinary step. Device backends only;
// on the CPU the host reads the flag itself (layers/optim/optimizer.h, step_unless).
struct DeviceStep {
  Tensor found_inf, step;
  bool defined() const { return found_inf.defined(); }
};

struct SgdHyper {
  double lr = 0, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
  bool init_buffer = false;  // first step: the momentum buffer becomes the gradient (no dampening)
  DeviceStep device;         // when defined, the first step is device.step == 0, not init_buffer
};
// momentum_buf: undefined when momentum == 0.
using SgdStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& momentum_buf, const SgdHyper& h);

struct AdamHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  double bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^step
  bool decoupled_weight_decay = false;                // AdamW
  bool amsgrad = false, maximize = false;
  DeviceStep device;  // when defined, the bias corrections come from device.step
};
// max_exp_avg_sq: undefined unless amsgrad.
using AdamStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                        const Tensor& max_exp_avg_sq, const AdamHyper& h);

struct RmspropHyper {
  double lr = 0, alpha = 0, eps = 0, weight_decay = 0, momentum = 0;
  bool centered = false, maximize = false;
  DeviceStep device;
};
// momentum_buf: undefined when momentum == 0; grad_avg: undefined unless centered.
using RmspropStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& square_avg,
                           const Tensor& momentum_buf, const Tensor& grad_avg, const RmspropHyper& h);

struct AdagradHyper {
  double clr = 0;  // lr / (1 + (step - 1) * lr_decay)
  double weight_decay = 0, eps = 0;
  bool maximize = false;
  double lr = 0, lr_decay = 0;  // clr's terms, for a step counted on the device
  DeviceStep device;            // when defined, clr comes from device.step
};
using AdagradStepFn = void(const Tensor& param, const Tensor& grad, const Tensor& state_sum, const AdagradHyper& h);

// One parameter's share of a multi-tensor Adam step: its tensors and its own bias corrections
// (each parameter counts its own steps). max_exp_avg_sq: undefined unless amsgrad. step: the
// parameter's DeviceStep count when h.device is defined (then the bias corrections are unused).
struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq;
  double bias_correction1 = 1, bias_correction2 = 1;
  Tensor step;
};
// The Adam step of many parameters of one device at once (h's own bias corrections and
// h.device.step are unused; h.device.found_inf is every parameter's):
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
// GradScaler's unscale_ of gradients of one device (float32/float64, contiguous): each multiplied
// in place by 1 / scale (scale: a one-element float64 on that device, read there), and found_inf
// (one-element float64, same device) set to 1 when an element was not finite before it (left as
// it was otherwise). One pass over every gradient, a few launches for a whole model on a device
// (as torch's _amp_foreach_non_finite_check_and_unscale_), and no host wait.
using UnscaleFn = void(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf);
// GradScaler's update() on the scale's device, as torch's _amp_update_scale_ (one launch, no host
// wait): when found_inf is nonzero, scale *= backoff_factor and tracker = 0; else tracker += 1,
// and when it reaches growth_interval, scale *= growth_factor and tracker = 0. scale, tracker (the
// clean steps since the scale last changed) and found_inf: one-element float64 tensors of one device.
struct ScaleUpdate {
  double growth_factor = 2.0, backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};
using UpdateScaleFn = void(const Tensor& scale, const Tensor& tracker, const Tensor& found_inf, const ScaleUpdate& u);
// The new (scale, tracker) from the old, as every backend's kernel computes them.
EMBER_HOST_DEVICE_FN void next_scale(double& scale, double& tracker, double found_inf, double growth_factor,
                                     double backoff_factor, double growth_interval) {
  if (found_inf != 0.0) {
    scale *= backoff_factor;
    tracker = 0.0;
  } else if (tracker + 1.0 >= growth_interval) {
    scale *= growth_factor;
    tracker = 0.0;
  } else {
    tracker += 1.0;
  }
}

// The checks every backend's unscale and update kernels make first: scale and found_inf (and the
// tracker, passed as scale) one-element float64 tensors, every gradient float32 or float64 and
// contiguous, all on `device`.
void check_unscale_args(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf, Device device);
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
EMBER_DECLARE_STUB(unscale_stub, UnscaleFn);
EMBER_DECLARE_STUB(update_scale_stub, UpdateScaleFn);
EMBER_DECLARE_STUB(clip_value_stub, ClipValueFn);

}  // namespace ember::optim
