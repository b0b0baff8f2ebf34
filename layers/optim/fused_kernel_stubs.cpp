// The dispatch stubs of the fused optimizer steps, defined once here; their CPU kernels
// (layers/optim/cpu/) are compiled once per CPU capability level and register into them.
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

EMBER_DEFINE_STUB(sgd_step_stub, SgdStepFn);
EMBER_DEFINE_STUB(adam_step_stub, AdamStepFn);
EMBER_DEFINE_STUB(rmsprop_step_stub, RmspropStepFn);
EMBER_DEFINE_STUB(adagrad_step_stub, AdagradStepFn);
EMBER_DEFINE_STUB(adam_multi_step_stub, AdamMultiStepFn);
EMBER_DEFINE_STUB(grad_norm_stub, GradNormFn);
EMBER_DEFINE_STUB(grad_norm_total_stub, GradNormTotalFn);
EMBER_DEFINE_STUB(scale_stub, ScaleFn);
EMBER_DEFINE_STUB(unscale_stub, UnscaleFn);
EMBER_DEFINE_STUB(update_scale_stub, UpdateScaleFn);
EMBER_DEFINE_STUB(clip_value_stub, ClipValueFn);

void check_unscale_args(const std::vector<Tensor>& grads, const Tensor& scale, const Tensor& found_inf, Device device) {
  for (const Tensor* t : {&scale, &found_inf})
    EMBER_CHECK(t->defined() && t->dtype() == DType::Float64 && t->numel() == 1 && t->device() == device,
                "GradScaler: the scale, its clean-step count and the inf flag must be one-element float64 tensors on ",
                device);
  for (const Tensor& g : grads)
    EMBER_CHECK(
        g.device() == device && g.is_contiguous() && (g.dtype() == DType::Float32 || g.dtype() == DType::Float64),
        "GradScaler.unscale_: gradients must be contiguous float32 or float64 on ", device, ", got ",
        dtype_name(g.dtype()), " on ", g.device());
}

}  // namespace ember::optim
