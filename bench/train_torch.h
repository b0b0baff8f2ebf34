// The libtorch side of bench/train (built only when libtorch is found; see CMakeLists.txt): the
// same models, batches, optimizer steps and thread counts as Ember's side, so the ratio compares
// like with like. Kept in its own file so that libtorch's headers never meet Ember's.
#pragma once

#include <functional>
#include <string>

namespace ember::bench {

// Prepares one training step of `model` ("mnist_cnn", "mlp_gan" or "dcgan") at `batch` with
// `threads` threads and returns a callable that runs one step; empty when libtorch is absent.
std::function<void()> torch_train_step(const std::string& model, int batch, int threads);
bool torch_available();

}  // namespace ember::bench
