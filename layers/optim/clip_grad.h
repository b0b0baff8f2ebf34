// Gradient clipping over a set of parameters, as torch.nn.utils.clip_grad_norm_ and
// clip_grad_value_. Both run through the fused kernels (one pass per gradient) and skip
// parameters without a gradient. Also reachable as nn::utils::clip_grad_norm_ / clip_grad_value_.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember::optim {

// Scales all gradients together so that their combined norm (p-norm over all elements of all
// gradients; norm_type = INFINITY for the max-abs norm) is at most max_norm, and returns the
// norm before clipping. The scale is max_norm / (norm + 1e-6) when that is below 1. With
// error_if_nonfinite, a NaN or infinite norm is an ember::Error (and nothing is scaled).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);
// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace ember::optim

namespace ember::nn::utils {
using optim::clip_grad_norm_;
using optim::clip_grad_value_;
}  // namespace ember::nn::utils
