// Recurrent layers over a whole sequence as single autograd nodes: the input projection for all
// time steps is one GEMM, the recurrent part runs per step, and backward through time is
// hand-written. Gate layouts follow PyTorch (LSTM: i, f, g, o; GRU: r, z, n) so weights and
// results match torch.nn.LSTM/GRU/RNN.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember {

enum class RnnMode { RnnTanh, RnnRelu, Lstm, Gru };

// One layer, one direction.
//   input  [T, B, I] (time-major, contiguous)
//   w_ih   [G*H, I], w_hh [G*H, H], b_ih/b_hh [G*H] or undefined (G = 1, 4, 3 for RNN/LSTM/GRU)
//   h0     [B, H] (c0 [B, H] for LSTM) or undefined = zeros
//   lengths: empty = every sequence has length T; else B non-increasing-or-any values in [1, T]:
//     sequence b stops at lengths[b]; its outputs past that are 0, its final state is the state at
//     its own length, and padding steps contribute no gradient.
//   reverse: processes each sequence from its last valid step back to step 0.
struct RnnLayerResult {
  Tensor output;  // [T, B, H]
  Tensor h_n;     // [B, H]
  Tensor c_n;     // [B, H] for LSTM, undefined otherwise
};
RnnLayerResult rnn_layer(RnnMode mode, const Tensor& input, const Tensor& w_ih, const Tensor& w_hh,
                         const Tensor& b_ih, const Tensor& b_hh, const Tensor& h0, const Tensor& c0,
                         const std::vector<int64_t>& lengths = {}, bool reverse = false);

}  // namespace ember
