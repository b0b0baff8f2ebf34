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
EMBER_DEFINE_STUB(clip_value_stub, ClipValueFn);

}  // namespace ember::optim
