// Gradient clipping over a set of parameters, as torch.nn.utils.clip_grad_norm_ and
// clip_grad_value_. Both run through the fused kernels (one pass per gradient) and skip
// parameters without a gradient. Also reachable as nn::utils::clip_grad_norm_ / clip_grad_value_.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace ember::optim {

// Scales all gradients together so that their combined norm (p-norm over all elements of all
// gradients; norm_type = INFINITY for the max-abs norm) is at most max_norm, and returns the
// norm before clipping. The scale is max_norm / (norm + 1e-6) when that is below 1. With
// error_if_nonfinite, a NaN or infinite norm is an ember::Error (and nothing is scaled).
//
// `combine`, for a model whose parameters are spread over processes (the stages of a pipeline):
// given this process's part of the norm (the sum of |g|^p over its gradients, or their max for
// INFINITY; `is_max` says which), it returns the whole model's, by reducing over the processes;
// every process then scales by the same factor, as one process holding the whole model would. It
// is called even when `params` hold no gradient, so that every process takes part.
using GradNormCombine = std::function<double(double part, bool is_max)>;
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false, const GradNormCombine& combine = {});
// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& params, double clip_value);

}  // namespace ember::optim

namespace ember::nn::utils {
using optim::clip_grad_norm_;
using optim::clip_grad_value_;
}  // namespace ember::nn::utils
