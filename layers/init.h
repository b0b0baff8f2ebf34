// Parameter initialisers (nn::init), with PyTorch's names, formulas and defaults, so that a layer
// initialised here has the same distribution as its torch.nn counterpart. Each fills its tensor in
// place without recording autograd history, drawing from `gen` (the default generator when null).
#pragma once

#include "core/generator.h"
#include "core/tensor.h"

namespace ember::nn::init {

enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, Relu, LeakyRelu, Selu };
enum class FanMode { FanIn, FanOut };

// The recommended gain for a nonlinearity (param: leaky_relu's negative slope, 0.01 when negative).
double calculate_gain(Nonlinearity nonlinearity, double param = -1.0);
// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field; tensors of at least 2 dims.
struct Fans {
  int64_t fan_in, fan_out;
};
Fans calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0, Generator* gen = nullptr);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

// U(-b, b), b = gain * sqrt(3 / fan); `a` is leaky_relu's slope (PyTorch's defaults: a = 0,
// fan_in, leaky_relu). Linear and Conv weights use a = sqrt(5).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                         Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, Generator* gen = nullptr);
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyRelu, Generator* gen = nullptr);
// U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)); normal with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
// A (semi-)orthogonal matrix times gain: the Q of a Householder QR (in double, on the CPU) of a
// standard normal matrix, with column signs fixed so that R has a positive diagonal. Tensors of
// more than 2 dims are viewed as [size(0), numel / size(0)].
Tensor& orthogonal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);

}  // namespace ember::nn::init
