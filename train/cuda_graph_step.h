// --cuda-graph (CommonFlags): the classifier's training step with its forward, loss, backward and
// correct count captured once in a CUDA graph (core/step_graph.h) and replayed, for models whose
// steps are launch-bound (MnistCnn: about 30 launches of microseconds each). The first
// kWarmupSteps steps run eagerly (kernel choices are timed, library handles and the allocator
// settle); then the capture, on the batch's shape. Each later step copies its batch into the
// static inputs, points the parameters' gradients back at the graph's (an eager step in between
// replaced them), replays, and runs the optimizer eagerly: its bias corrections and learning rate
// are host values that change from step to step. A batch of another shape (the epoch's last)
// runs eagerly. The loss and correct count are read after the replay, outside the graph. Under
// --precision fp16 the graph's backward starts from the loss times the GradScaler's scale, read
// on the device, and the scaler's skip and update after the replay wait on nothing
// (layers/optim/grad_scaler.h).
//
// Refused with ember::Error: a device other than CUDA, a data-parallel or pipeline job (their
// collectives and transfers run on other streams and wait on the host). The capture itself
// refuses random draws in the step (dropout) and host waits.
// Never run on a GPU yet (docs/cuda/runtime.md, "CUDA graphs").
#pragma once

#include <string>

#include "core/device.h"
#include "core/ops/nn.h"
#include "core/tensor.h"
#include "layers/module.h"
#include "layers/optim/optimizer.h"
#include "train/training.h"

namespace ember::train {

// Set by CommonFlags::check from --cuda-graph.
bool& cuda_graph_requested();

// The refusals above; `parallel`: a data-parallel or pipeline job.
void check_cuda_graph(Device dev, bool parallel);

// Runs one step of `net` through its graph and adds to `sums` as the eager step does; false when
// the step must run eagerly instead (a warm-up step, or a batch of another shape).
bool graphed_classifier_step(nn::Module& net, optim::Optimizer& opt, Device dev, const Tensor& x, const Tensor& y,
                             RunningSums& sums, const CrossEntropyOptions& criterion);

}  // namespace ember::train
