// Fused neural-network ops: each is one autograd node with a hand-written backward (convolution,
// pooling, normalisation, dropout, fused softmax-cross-entropy). Layers in layers/ wrap these;
// this header is their math. Layouts are NCHW; weights [out, in/groups, kh, kw] as in PyTorch.
#pragma once

#include <array>
#include <optional>
#include <utility>

#include "core/generator.h"
#include "core/tensor.h"

namespace ember {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
  bool same_padding = false;  // "same": output size = ceil(input / stride) (stride 1 only, as PyTorch)
};

// input [N, C, H, W], weight [OC, C/groups, KH, KW], bias [OC] or undefined.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(), Conv2dParams p = {});

struct ConvTranspose2dParams {
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> output_padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};
  int64_t groups = 1;
};

// input [N, C, H, W], weight [C, OC/groups, KH, KW] (PyTorch's layout), bias [OC] or undefined.
Tensor conv_transpose2d(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor(),
                        ConvTranspose2dParams p = {});

struct Pool2dParams {
  std::array<int64_t, 2> kernel{2, 2};
  std::array<int64_t, 2> stride{0, 0};  // 0 = kernel size
  std::array<int64_t, 2> padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;  // avg pooling only
};

Tensor max_pool2d(const Tensor& input, Pool2dParams p);
Tensor max_pool2d(const Tensor& input, int64_t kernel);  // kernel = stride, no padding
// Values and flat (per-plane) int64 indices, as PyTorch's return_indices=True.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& input, Pool2dParams p);
// max_pool2d(conv2d(input, weight, bias, conv), pool): the same values and gradients, on the CPU
// a few images at a time so that the convolution's output stays in cache (core/ops/conv_pool.cpp).
// A fused nn::Sequential (nn::fuse, layers/fusion.h) runs its Conv2d-MaxPool2d pairs through it.
Tensor conv2d_max_pool2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Conv2dParams conv,
                         Pool2dParams pool);
Tensor avg_pool2d(const Tensor& input, Pool2dParams p);
Tensor adaptive_avg_pool2d(const Tensor& input, std::array<int64_t, 2> output_size);

// Batch norm over [N, C, *]. In training, uses batch statistics and, when running_mean/var are
// defined, updates them in place with `momentum` (unbiased variance, as PyTorch). In eval, uses the
// running statistics. weight/bias [C] or undefined.
Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum = 0.1, double eps = 1e-5);
// Layer norm over the trailing `normalized_shape` dims.
Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

// Inverted dropout: zeroes with probability p and scales the rest by 1/(1-p); identity when
// !training or p == 0. The mask comes from `gen` (default generator when null).
Tensor dropout(const Tensor& input, double p, bool training, Generator* gen = nullptr);

enum class Reduction { None, Mean, Sum };

// Fused log_softmax + nll over class dim 1: logits [N, C] or [N, C, d1, ...]; target int64 class
// indices [N] / [N, d1, ...] or float probabilities with logits' shape. One autograd node whose
// backward is softmax - target (with weights, smoothing and ignore_index applied).
struct CrossEntropyOptions {
  Tensor weight;  // [C] class weights, optional
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::Mean;
};
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts = {});

}  // namespace ember
