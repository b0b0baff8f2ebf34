// Recurrent layers over a whole sequence as single autograd nodes: the input projection for all
// time steps is one GEMM, the recurrent part runs per step, and backward through time is
// hand-written. Gate layouts follow PyTorch (LSTM: i, f, g, o; GRU: r, z, n) so weights and
// results match torch.nn.LSTM/GRU/RNN.
#pragma once

#include <array>
#include <vector>

#include "core/rnn_mode.h"
#include "core/tensor.h"

namespace ember {

// One layer, one direction; one autograd node per call (a multi-layer RNN calls it per layer, a
// bidirectional one rnn_layer_bidirectional below, and joins the directions' outputs along the
// feature dim).
//   input  [T, B, I], time-major, T >= 1 (a non-contiguous view, e.g. a batch-first tensor
//          transposed, is copied once)
//   w_ih   [G*H, I], w_hh [G*H, H], b_ih/b_hh [G*H] or undefined (G = 1, 4, 3 for RNN/LSTM/GRU)
//   h0     [B, H] (c0 [B, H], LSTM only) or undefined = zeros
//   All operands share the input's dtype (float32 or float64) and device.
//   lengths: empty = every sequence has length T; else B values in [1, T], in any order: sequence
//     b is active at steps t < lengths[b]; its outputs past that are 0, its final state is the
//     state at its own length, and padding steps contribute no gradient.
//   reverse: processes each sequence from its last valid step (lengths[b] - 1) back to step 0,
//     as the backward direction of a bidirectional torch.nn.LSTM over a packed sequence does.
// Bad shapes, dtypes, devices or lengths raise ember::Error naming rnn_layer.
struct RnnLayerResult {
  Tensor output;  // [T, B, H]
  Tensor h_n;     // [B, H]
  Tensor c_n;     // [B, H] for LSTM, undefined otherwise
};
RnnLayerResult rnn_layer(RnnMode mode, const Tensor& input, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                         const Tensor& b_hh, const Tensor& h0, const Tensor& c0,
                         const std::vector<int64_t>& lengths = {}, bool reverse = false);

// One direction's operands for rnn_layer_bidirectional, as rnn_layer takes them.
struct RnnDirectionWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;  // biases may be undefined
  Tensor h0, c0;                  // undefined = zeros
};

// Both directions of a bidirectional layer over the same input and lengths, in one autograd node:
// [0] is what rnn_layer(..., reverse = false) gives with fwd's operands, [1] what rnn_layer(...,
// reverse = true) gives with bwd's, the same values and gradients. On a CPU running two threads
// the two directions run at once, one thread each, forward and backward, instead of sharing each
// step between the threads one direction after the other; on a CUDA device each step of both is
// one batched GEMM and one cell launch. nn::LSTM/GRU/RNN call it for every
// bidirectional layer. The same errors as rnn_layer.
std::array<RnnLayerResult, 2> rnn_layer_bidirectional(RnnMode mode, const Tensor& input, const RnnDirectionWeights& fwd,
                                                      const RnnDirectionWeights& bwd,
                                                      const std::vector<int64_t>& lengths = {});

}  // namespace ember
