// Recurrent layers over a whole sequence as single autograd nodes: the input projection for all
// time steps is one GEMM, the recurrent part runs per step, and backward through time is
// hand-written. Gate layouts follow PyTorch (LSTM: i, f, g, o; GRU: r, z, n) so weights and
// results match torch.nn.LSTM/GRU/RNN.
#pragma once

#include <vector>

#include "core/rnn_mode.h"
#include "core/tensor.h"

namespace ember {

// One layer, one direction; one autograd node per call (a multi-layer or bidirectional RNN calls
// it per layer and direction and joins the directions' outputs along the feature dim).
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

}  // namespace ember
