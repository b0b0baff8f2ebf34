// Kernel interface for the fused neural-network ops of core/ops/nn.h: convolution (forward and
// both backward passes; conv_transpose2d reuses them with the roles swapped), pooling, batch and
// layer normalisation, dropout masking and softmax-cross-entropy. The op files check arguments,
// make every tensor contiguous and allocate outputs; each device registers one kernel per stub.
// Float kernels run in the tensors' dtype (float32 or float64); statistics accumulate in double.
#pragma once

#include <cstdint>

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

// ------------------------------------------------------------------ convolution
// A convolution from input [N, C, H, W] to output [N, OC, OH, OW] with weight
// [OC, C/groups, KH, KW]. Input row ih feeds output row oh through kernel row kh when
// ih = oh * sh - ph + kh * dh (likewise for columns); positions outside the input read zero. The
// output size is given rather than derived, so asymmetric ("same") padding and
// conv_transpose2d's output_padding need nothing else.
struct ConvGeometry {
  int64_t N = 0, C = 0, H = 0, W = 0;
  int64_t OC = 0, KH = 0, KW = 0;
  int64_t OH = 0, OW = 0;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t groups = 1;
  // The layer's tensors were bfloat16: its GEMMs round their float32 operands to bfloat16 and run
  // the bfloat16 GEMM (core/cpu/bf16_gemm.h: vdpbf16ps at the avx512bf16 level), float32 sums.
  bool bf16_gemms = false;
};

// out = conv(input, weight) + bias (bias undefined: none).
using ConvForwardFn = void(const Tensor& out, const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const ConvGeometry& g);
// grad_input = conv's gradient w.r.t. its input, plus `bias` per channel of grad_input when defined
// (conv_transpose2d's forward is this with its own bias).
using ConvBackwardInputFn = void(const Tensor& grad_input, const Tensor& grad_out, const Tensor& weight,
                                 const Tensor& bias, const ConvGeometry& g);
// grad_weight (when defined) and grad_bias = sum of grad_out over N, OH, OW (when defined); both
// are overwritten.
using ConvBackwardWeightFn = void(const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_out,
                                  const Tensor& input, const ConvGeometry& g);
EMBER_DECLARE_STUB(conv2d_forward_stub, ConvForwardFn);
EMBER_DECLARE_STUB(conv2d_backward_input_stub, ConvBackwardInputFn);
EMBER_DECLARE_STUB(conv2d_backward_weight_stub, ConvBackwardWeightFn);

// ------------------------------------------------------------------ pooling
// Over P = N * C independent planes of H x W, to OH x OW. Window (oh, ow) starts at
// (oh * sh - ph, ow * sw - pw) and spans kh x kw (clipped to the input; average pooling's divisor
// follows PyTorch: the window clipped to the padded input when count_include_pad, else to the
// input itself).
struct Pool2dGeometry {
  int64_t P = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  bool count_include_pad = true;
};

// indices: int64 flat positions within each input plane (first maximum on ties; NaN wins).
using MaxPoolForwardFn = void(const Tensor& out, const Tensor& indices, const Tensor& input, const Pool2dGeometry& g);
using MaxPoolBackwardFn = void(const Tensor& grad_input, const Tensor& grad_out, const Tensor& indices,
                               const Pool2dGeometry& g);
using AvgPoolForwardFn = void(const Tensor& out, const Tensor& input, const Pool2dGeometry& g);
using AvgPoolBackwardFn = void(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g);
// Adaptive average pooling: output cell i covers input [floor(i*H/OH), ceil((i+1)*H/OH)); only
// P, H, W, OH, OW of the geometry are used.
using AdaptiveAvgPoolForwardFn = void(const Tensor& out, const Tensor& input, const Pool2dGeometry& g);
using AdaptiveAvgPoolBackwardFn = void(const Tensor& grad_input, const Tensor& grad_out, const Pool2dGeometry& g);
EMBER_DECLARE_STUB(max_pool2d_forward_stub, MaxPoolForwardFn);
EMBER_DECLARE_STUB(max_pool2d_backward_stub, MaxPoolBackwardFn);
EMBER_DECLARE_STUB(avg_pool2d_forward_stub, AvgPoolForwardFn);
EMBER_DECLARE_STUB(avg_pool2d_backward_stub, AvgPoolBackwardFn);
EMBER_DECLARE_STUB(adaptive_avg_pool2d_forward_stub, AdaptiveAvgPoolForwardFn);
EMBER_DECLARE_STUB(adaptive_avg_pool2d_backward_stub, AdaptiveAvgPoolBackwardFn);

// ------------------------------------------------------------------ normalisation
// Batch norm over input [N, C, S] (S = product of the spatial dims, 1 for [N, C]).
// Training: normalises with the batch mean and biased variance and, when running_mean/running_var
// are defined, updates them in place: r = (1 - momentum) * r + momentum * stat, with the unbiased
// variance. Eval (training false): normalises with the running statistics.
// Either way save_mean and save_invstd ([C], float64 whatever the input's dtype) receive the mean
// and 1/sqrt(var + eps) that were used, which is all the backward needs. weight/bias [C] may be undefined (1 and 0).
struct BatchNormArgs {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
};
using BatchNormForwardFn = void(const Tensor& out, const Tensor& save_mean, const Tensor& save_invstd,
                                const Tensor& input, const Tensor& weight, const Tensor& bias,
                                const Tensor& running_mean, const Tensor& running_var, const BatchNormArgs& a);
// grad_input/grad_weight/grad_bias may each be undefined (not wanted). In training grad_input
// includes the statistics' dependence on the input; in eval the statistics are constants.
using BatchNormBackwardFn = void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Tensor& grad_out, const Tensor& input, const Tensor& weight,
                                 const Tensor& save_mean, const Tensor& save_invstd, bool training);
EMBER_DECLARE_STUB(batch_norm_forward_stub, BatchNormForwardFn);
EMBER_DECLARE_STUB(batch_norm_backward_stub, BatchNormBackwardFn);

// Layer norm over rows: input [M, D], weight/bias [D] or undefined; mean and rstd [M], float64.
using LayerNormForwardFn = void(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& input,
                                const Tensor& weight, const Tensor& bias, double eps);
using LayerNormBackwardFn = void(const Tensor& grad_input, const Tensor& grad_weight, const Tensor& grad_bias,
                                 const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& mean,
                                 const Tensor& rstd);
EMBER_DECLARE_STUB(layer_norm_forward_stub, LayerNormForwardFn);
EMBER_DECLARE_STUB(layer_norm_backward_stub, LayerNormBackwardFn);

// ------------------------------------------------------------------ dropout
// out = input * mask * scale with a uint8 0/1 mask of the same shape (also the backward:
// grad_input = grad_out * mask * scale).
using DropoutApplyFn = void(const Tensor& out, const Tensor& input, const Tensor& mask, double scale);
EMBER_DECLARE_STUB(dropout_apply_stub, DropoutApplyFn);

// ------------------------------------------------------------------ cross-entropy
// Logits [N, C, S] (S = product of the trailing dims, 1 for [N, C]).
// Class targets: int64 [N, S]; weight [C] or undefined; loss [N, S] gets, for each sample with
// target t != ignore_index,
//   (1 - ls) * w[t] * -logp[t] + (ls / C) * sum_c w[c] * -logp[c]
// and 0 for ignored ones; total_weight (0-dim) gets the sum of w[t] over non-ignored samples
// (their count without weights). A target outside [0, C) that is not ignore_index throws.
// Probability targets: target [N, C, S] float (already smoothed by the op); loss [N, S] gets
// sum_c w[c] * target[c] * -logp[c]; total_weight is not written.
// lse [N, S] receives logsumexp over classes for the backward.
struct CrossEntropyArgs {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  bool prob_target = false;
};
using CrossEntropyForwardFn = void(const Tensor& loss, const Tensor& lse, const Tensor& total_weight,
                                   const Tensor& logits, const Tensor& target, const Tensor& weight,
                                   const CrossEntropyArgs& a);
// grad_loss [N, S] (may be an expanded view with zero strides), divided by `divisor` (0-dim, same
// dtype; undefined: 1) for mean reduction, per sample:
// grad_logits [N, C, S] = d loss / d logits; grad_target (probability targets only, may be
// undefined) = d loss / d target (before smoothing: the op applies the smoothing's factor).
using CrossEntropyBackwardFn = void(const Tensor& grad_logits, const Tensor& grad_target, const Tensor& grad_loss,
                                    const Tensor& divisor, const Tensor& logits, const Tensor& lse,
                                    const Tensor& target, const Tensor& weight, const CrossEntropyArgs& a);
EMBER_DECLARE_STUB(cross_entropy_forward_stub, CrossEntropyForwardFn);
EMBER_DECLARE_STUB(cross_entropy_backward_stub, CrossEntropyBackwardFn);

}  // namespace ember
