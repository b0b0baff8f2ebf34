// The reference side of bench/layers: the same layers set up in libtorch, behind plain C++
// signatures so that bench/layers.cpp never compiles torch headers. layers_torch.cpp implements
// it when CMake found libtorch (cmake/EmberLibtorch.cmake); layers_torch_absent.cpp otherwise,
// where available() is false and the table prints "n/a". Each function builds its layer and
// inputs and returns a closure that makes one call; bench/layers.cpp times it interleaved with
// the Ember call, so both sides see the same machine load.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace ember::bench::torchref {

struct ConvShape {
  int64_t batch, in_channels, out_channels, height, width, kernel, padding, stride = 1;
};
struct PoolShape {
  int64_t batch, channels, height, width, kernel, stride, padding;
};

bool available();
std::string version();
// torch::set_num_threads (OpenMP and the BLAS it uses).
void set_threads(int n);

using Call = std::function<void()>;

Call conv2d_forward(const ConvShape& s);
// Gradients of the input, weight and bias for a given output gradient (graph kept between calls).
Call conv2d_backward(const ConvShape& s);
Call max_pool2d_forward(const PoolShape& s);
Call max_pool2d_backward(const PoolShape& s);
// One LSTM layer over [steps, batch, hidden] inputs (input size = hidden).
Call lstm_forward(int64_t steps, int64_t batch, int64_t hidden);
Call lstm_forward_backward(int64_t steps, int64_t batch, int64_t hidden);
// One optimizer step over parameters of the given sizes with fixed random gradients.
// kind: "sgd" (lr 0.01, momentum 0.9) or "adam" (lr 1e-3).
Call optimizer_step(const std::string& kind, const int64_t* sizes, int count);

}  // namespace ember::bench::torchref
