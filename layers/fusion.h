// The fusion pass: nn::fuse(model) lets every nn::Sequential of a model run some runs of its
// elements as fewer, faster ops, with the same values and gradients (up to the rounding of a
// different summation order). It is explicit: a Sequential runs its elements one by one, each
// through its operator(), until nn::fuse (or set_fusion(true)) turns fusion on for it.
//
// With fusion on, a Sequential runs
// - a Conv2d followed by a MaxPool2d, with or without a ReLU between them, as one op,
//   conv2d_max_pool2d (then the ReLU): on the CPU it convolves and pools a few images at a time,
//   so that the convolution's output stays in the core's cache (core/ops/conv_pool.cpp; weights
//   above 256 KiB, and other devices, run the two ops). Its gradients are the two ops' within
//   rounding: the weight's and bias's sums run in another order.
// - a ReLU followed by a MaxPool2d as the pooling then the ReLU: the same values and gradients
//   (ReLU is monotone, so the largest rectified element of a window is the rectified largest one;
//   a NaN wins either way), with a quarter of the rectification for 2x2 windows.
// Only modules of exactly these types take part (a subclass may do more), and none with a forward
// hook, which would see the tensors of another order: the match is made at each forward, so a
// hook added later (summary() adds them) keeps the modules apart. The module tree is not changed:
// parameter names, checkpoints, summary() rows, pipeline cuts and ONNX export are those of the
// elements written.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "layers/module.h"

namespace ember::nn {

// One run of a Sequential's elements that runs fused.
struct FusedRun {
  std::vector<std::string> modules;  // the elements' dotted names in the model ("c1", "relu1", "pool1")
  std::string as;                    // what runs: "conv2d_max_pool2d, relu" or "max_pool2d, relu"
};

// Turns fusion on in `model` and in every Sequential inside it (the model itself when it is one),
// and returns the runs that fuse now (in module order). Call it once the model is built; the
// examples and `ember train` call it on the models they train.
std::vector<FusedRun> fuse(Module& model);
// Turns fusion off in `model` and every Sequential inside it.
void unfuse(Module& model);

namespace detail {
// Sequential::forward's step with fusion on: when a fused run starts at items[i], runs it on `x`
// and returns how many elements it took (2 or 3); otherwise 0, and `x` is untouched.
size_t run_fused(const std::vector<std::shared_ptr<Module>>& items, size_t i, Tensor& x);
}  // namespace detail

}  // namespace ember::nn
