// Ember's side of the training benchmarks: one training step of each workload of
// bench/workloads.h, built once on fixed random data (the models, batches and optimizers that
// bench/train, bench/train_text and bench/step_rate time).
#pragma once

#include <functional>
#include <string>

namespace ember::bench {

// An empty function for a name that is not a workload. `batch` 0: the workload's own
// (bench/workloads.h); otherwise that batch (the scaling table).
std::function<void()> ember_train_step(const std::string& workload, int batch = 0);

}  // namespace ember::bench
