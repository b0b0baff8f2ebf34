// The reference side of bench/layers: the same layers measured in libtorch, behind plain C++
// signatures so that bench/layers.cpp never compiles torch headers. layers_torch.cpp implements
// it when CMake found libtorch (cmake/EmberLibtorch.cmake); layers_torch_absent.cpp otherwise,
// where available() is false and the table prints "n/a". Every function returns the median
// seconds of one call (bench_util.h's seconds_per_call), so both sides are timed the same way.
#pragma once

#include <cstdint>
#include <string>

namespace ember::bench::torchref {

struct ConvShape {
  int64_t batch, in_channels, out_channels, height, width, kernel, padding;
};
struct PoolShape {
  int64_t batch, channels, height, width, kernel, stride, padding;
};

bool available();
std::string version();
// torch::set_num_threads (OpenMP and the BLAS it uses).
void set_threads(int n);

double conv2d_forward(const ConvShape& s);
// Gradients of the input, weight and bias for a given output gradient (graph kept between calls).
double conv2d_backward(const ConvShape& s);
double max_pool2d_forward(const PoolShape& s);
double max_pool2d_backward(const PoolShape& s);
// One LSTM layer over [steps, batch, hidden] inputs (input size = hidden).
double lstm_forward(int64_t steps, int64_t batch, int64_t hidden);
double lstm_forward_backward(int64_t steps, int64_t batch, int64_t hidden);
// One optimizer step over parameters of the given sizes with fixed random gradients.
// kind: "sgd" (lr 0.01, momentum 0.9) or "adam" (lr 1e-3).
double optimizer_step(const std::string& kind, const int64_t* sizes, int count);

}  // namespace ember::bench::torchref
