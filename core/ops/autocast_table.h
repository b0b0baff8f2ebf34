// Ember's autocast op list: the one table that says, for every op autocast touches, which
// precision it runs in inside an `ember::autocast` scope (core/ops/autocast.h). An op not listed
// runs in the dtype of its inputs, as in PyTorch.
//
// The reference is PyTorch's own lists (torch 2.x, aten/src/ATen/autocast_mode.cpp and the
// torch.amp documentation, "Autocast Op Reference"):
//   - LowPrecision: PyTorch's "lower_precision_fp" (CUDA: "CUDA Ops that can autocast to
//     float16"; CPU: "CPU Ops that can autocast to bfloat16"): conv*, conv_transpose*, bmm, mm,
//     matmul, addmm, baddbmm, linear, and the RNN cells (CUDA GRUCell/LSTMCell/RNNCell, CPU
//     mkldnn_rnn_layer). Float32 (and the other 16-bit type) operands are cast to the scope's
//     dtype; float64 and integer operands are left alone, so float64 gradient checks are unchanged.
//   - Float32: PyTorch's "fp32" lists (CUDA "Ops that can autocast to float32": exp, log, log1p,
//     pow, rsqrt, softplus, layer_norm, group_norm, norm, logsumexp, every loss such as nll_loss,
//     mse_loss, l1_loss, smooth_l1_loss, kl_div, binary_cross_entropy_with_logits; and the ops
//     that take an output dtype and autocast runs in float32: softmax, log_softmax, sum, prod,
//     cumsum). Float16/bfloat16 operands are cast to float32.
//   - Promote: PyTorch's "promote" list (addcdiv, addcmul, atan2, bilinear, cross, dot,
//     grid_sample, index_put, scatter_add, tensordot, and in practice every binary op): the op
//     runs in the widest floating dtype of its inputs. Ember's binary ops already promote
//     (promote_types in core/dtype.h), so these rows only record it; autocast casts nothing.
//
// Where Ember departs from PyTorch, the row says why. Ember's CPU treats float16/bfloat16 as
// storage types (core/dtype.h): beyond the GEMM-shaped ops there are no 16-bit CPU kernels, so the
// activations, pooling and dropout, which PyTorch runs in the input's dtype, are Float32 here; a
// tensor leaves a LowPrecision op in 16 bits and is widened once by the next op (and a
// convolution or linear layer after it narrows it again, one vectorised pass each way).
//
// The optimizers are not ops of this table: they run outside autocast on the float32 master
// weights and their float32 gradients (tests/core/autocast_test.cpp checks both).
//
// Every row has a test (tests/core/autocast_test.cpp): the output dtype under autocast, and the
// value against float32 within the 16-bit type's tolerance; the test fails when a row lacks one.
#pragma once

// X(name, class): `name` is the op's function name, AutocastOp::name its id.
#define EMBER_AUTOCAST_OPS(X)                                                                   \
  /* LowPrecision: the matrix products and the layers built on them */                          \
  X(matmul, LowPrecision)                                                                       \
  X(mm, LowPrecision)                                                                           \
  X(bmm, LowPrecision)                                                                          \
  X(addmm, LowPrecision)                                                                        \
  X(linear, LowPrecision)                                                                       \
  X(conv2d, LowPrecision)                                                                       \
  X(conv_transpose2d, LowPrecision)                                                             \
  /* The fused convolution + max pooling: its convolution in 16 bits, its pooling in float32 */ \
  /* (below), so it returns float32 */                                                          \
  X(conv2d_max_pool2d, LowPrecision)                                                            \
  /* One RNN/LSTM/GRU layer: PyTorch's CPU mkldnn_rnn_layer, the gate GEMMs of every step */    \
  X(rnn_layer, LowPrecision)                                                                    \
  /* Float32: softmax and its kin, statistics, reductions, exp/log/pow, the losses */           \
  X(softmax, Float32)                                                                           \
  X(log_softmax, Float32)                                                                       \
  X(logsumexp, Float32)                                                                         \
  X(layer_norm, Float32)                                                                        \
  /* batch norm: PyTorch runs it in the input's dtype with float32 statistics; Ember has no */  \
  /* 16-bit kernel, so the whole op is float32 */                                               \
  X(batch_norm, Float32)                                                                        \
  X(sum, Float32)                                                                               \
  X(mean, Float32)                                                                              \
  X(norm, Float32)                                                                              \
  X(var, Float32)                                                                               \
  X(std, Float32)                                                                               \
  X(exp, Float32)                                                                               \
  X(log, Float32)                                                                               \
  X(log1p, Float32)                                                                             \
  X(pow, Float32)                                                                               \
  X(rsqrt, Float32)                                                                             \
  X(softplus, Float32)                                                                          \
  X(cross_entropy, Float32)                                                                     \
  X(nll_loss, Float32)                                                                          \
  X(mse_loss, Float32)                                                                          \
  X(l1_loss, Float32)                                                                           \
  X(smooth_l1_loss, Float32)                                                                    \
  X(kl_div, Float32)                                                                            \
  X(binary_cross_entropy, Float32)                                                              \
  X(binary_cross_entropy_with_logits, Float32)                                                  \
  /* Float32 in Ember only (PyTorch: the input's dtype): no 16-bit CPU kernels, see above */    \
  X(relu, Float32)                                                                              \
  X(leaky_relu, Float32)                                                                        \
  X(gelu, Float32)                                                                              \
  X(sigmoid, Float32)                                                                           \
  X(tanh, Float32)                                                                              \
  X(max_pool2d, Float32)                                                                        \
  X(avg_pool2d, Float32)                                                                        \
  X(adaptive_avg_pool2d, Float32)                                                               \
  X(dropout, Float32)                                                                           \
  /* Promote: the widest input dtype (the ops' own promotion; autocast casts nothing) */        \
  X(add, Promote)                                                                               \
  X(sub, Promote)                                                                               \
  X(mul, Promote)                                                                               \
  X(div, Promote)                                                                               \
  X(maximum, Promote)                                                                           \
  X(minimum, Promote)                                                                           \
  X(where, Promote)
