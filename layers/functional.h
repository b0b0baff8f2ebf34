// nn::functional (alias nn::F): the math of every layer and loss as free functions, for models
// that hold their own parameters or want a layer's math without its module. Activations and the
// fused ops (convolution, pooling, normalisation, dropout, embedding, cross-entropy) are core's
// ops re-exported under their PyTorch names; linear and the losses other than cross-entropy are
// composed here from core ops (binary_cross_entropy_with_logits has its own stable backward).
// The losses are also reachable as nn::mse_loss etc.
#pragma once

#include <cstdint>

#include "core/ops.h"

namespace ember::nn {

using ember::CrossEntropyOptions;
using ember::Reduction;

namespace functional {

// ---- activations and softmax (core ops)
using ember::elu;
using ember::gelu;
using ember::leaky_relu;
using ember::log_softmax;
using ember::relu;
using ember::sigmoid;
using ember::softmax;
using ember::softplus;
using ember::tanh;

// ---- layers (core's fused ops)
using ember::adaptive_avg_pool2d;
using ember::avg_pool2d;
using ember::batch_norm;
using ember::conv2d;
using ember::conv2d_max_pool2d;
using ember::conv_transpose2d;
using ember::dropout;
using ember::embedding;
using ember::layer_norm;
using ember::max_pool2d;
using ember::max_pool2d_with_indices;
// One recurrent layer and direction over a whole sequence (what RNN/LSTM/GRU call per layer), and
// both directions of a bidirectional layer at once (what they call per bidirectional layer).
using ember::rnn_layer;
using ember::rnn_layer_bidirectional;
using ember::RnnDirectionWeights;
using ember::RnnLayerResult;
using ember::RnnMode;

// y = x W^T + b over the last dim of x: weight [out, in], bias [out] or undefined; x [..., in].
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor());

// ---- losses. Element losses reduced by `reduction` (None keeps the element shape).
// Cross-entropy from logits: core's fused op (class indices or probabilities, class weights,
// ignore_index, label_smoothing).
using ember::cross_entropy;

struct NllLossOptions {
  Tensor weight = {};  // [C] class weights, optional
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
// Negative log-likelihood of log-probabilities [N, C] or [N, C, d1, ...] at int64 targets [N] /
// [N, d1, ...]. Mean divides by the summed weights of the non-ignored targets, as PyTorch.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options = {});

// -(y log p + (1 - y) log(1 - p)), each log clamped at -100 as PyTorch; p in [0, 1].
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                            Reduction reduction = Reduction::Mean);

struct BceWithLogitsOptions {
  Tensor weight = {};      // broadcast to the input, optional
  Tensor pos_weight = {};  // broadcast along the last dim (per class), optional
  Reduction reduction = Reduction::Mean;
};
// Sigmoid + binary cross-entropy in one stable expression, max(x, 0) - x y + log1p(exp(-|x|))
// (with pos_weight pw: (1 - y) x + (1 + (pw - 1) y) (log1p(exp(-|x|)) + max(-x, 0))); its
// gradient is the exact sigmoid(x) - y form, also at x = 0.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BceWithLogitsOptions& options = {});

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// 0.5 d² / beta where |d| < beta, else |d| - 0.5 beta (beta = 0 gives the L1 loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean,
                      double beta = 1.0);

// KL divergence with `input` as log-probabilities: target (log target - input), 0 where the
// target is 0. BatchMean divides the sum by the batch size (size of dim 0), which is the
// mathematically correct KL mean; Mean divides by the element count, as PyTorch's default.
enum class KlReduction { None, Mean, Sum, BatchMean };
Tensor kl_div(const Tensor& input, const Tensor& target, KlReduction reduction = KlReduction::Mean,
              bool log_target = false);

// Applies a reduction to element losses (the helper every loss uses).
Tensor reduce_loss(const Tensor& loss, Reduction reduction);

}  // namespace functional

namespace F = functional;

using functional::BceWithLogitsOptions;
using functional::binary_cross_entropy;
using functional::binary_cross_entropy_with_logits;
using functional::cross_entropy;
using functional::kl_div;
using functional::KlReduction;
using functional::l1_loss;
using functional::mse_loss;
using functional::nll_loss;
using functional::NllLossOptions;
using functional::smooth_l1_loss;

}  // namespace ember::nn
