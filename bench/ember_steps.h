// Ember's side of the training benchmarks: one training step of each workload of
// bench/workloads.h, built once on fixed random data (the models, batches and optimizers that
// bench/train, bench/train_text and bench/step_rate time).
#pragma once

#include <functional>
#include <string>

#include "core/device.h"

namespace ember::bench {

struct StepOptions {
  int batch = 0;  // 0: the workload's own (bench/workloads.h); otherwise that batch (the scaling table)
  Device device = Device::cpu();
  // Capture the step in a CUDA graph (core/step_graph.h) after three eager warm-up steps; each
  // call then copies the batch into the static inputs and replays. The classifiers and the
  // language model capture forward, loss and backward and run the optimizer after the replay
  // (its bias corrections change every step, and are host scalars); the GANs capture their whole
  // step, which draws noise on the device, so the capture refuses them.
  bool cuda_graph = false;
};

// An empty function for a name that is not a workload.
std::function<void()> ember_train_step(const std::string& workload, const StepOptions& o);
inline std::function<void()> ember_train_step(const std::string& workload, int batch = 0) {
  return ember_train_step(workload, StepOptions{.batch = batch});
}

}  // namespace ember::bench
