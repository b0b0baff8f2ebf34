// Rows: the recurrent layers' kernels (core/rnn_kernels.h; on CUDA the fused LSTM/GRU/RNN cell
// kernels around the GEMM stub, core/cuda/rnn.cu), forward and backward: every mode, both
// directions, with and without biases and initial states, padded sequences, hidden sizes past a
// warp and B * H past a block, and bias gradients over enough rows (T * B) to be split into row
// slices, in float32 and float64. Each row compares the output, h_n and (LSTM) c_n, so every
// gradient the backward computes is driven. The workspace the forward leaves for the backward is
// checked through those gradients. These rows took over tests/emu's RNN checks.
#include <string>
#include <vector>

#include "op_table.h"

namespace ember::ops_test {
namespace {

struct Case {
  RnnMode mode;
  bool reverse, bias, init;
  int64_t T, B, I, H;
  std::vector<int64_t> lengths;
};

const char* mode_name(RnnMode m) {
  switch (m) {
    case RnnMode::Lstm:
      return "lstm";
    case RnnMode::Gru:
      return "gru";
    case RnnMode::RnnRelu:
      return "rnn_relu";
    default:
      return "rnn_tanh";
  }
}

// Inputs: input, w_ih, w_hh, then b_ih and b_hh (with biases), then h0 and, for an LSTM, c0 (with
// initial states). Weights scaled by 0.4 keep the recurrence away from saturation.
OpRow rnn_row(const std::string& what, const Case& k, DType dt) {
  const bool lstm = k.mode == RnnMode::Lstm;
  const std::string name = std::string("rnn_cells_") + mode_name(k.mode) + "_" + dtype_name(dt) + "_" + what;
  OpRow r{
      name,
      [k, dt, lstm](Generator& g) {
        const TensorOptions o{.dtype = dt};
        const int64_t GH = rnn_gate_count(k.mode) * k.H;
        Inputs in{randn({k.T, k.B, k.I}, o, &g), mul(randn({GH, k.I}, o, &g), 0.4), mul(randn({GH, k.H}, o, &g), 0.4)};
        if (k.bias) in.push_back(randn({GH}, o, &g)), in.push_back(randn({GH}, o, &g));
        if (k.init) {
          in.push_back(randn({k.B, k.H}, o, &g));
          if (lstm) in.push_back(randn({k.B, k.H}, o, &g));
        }
        return in;
      },
      [k, lstm](const Inputs& x) {
        size_t i = 3;
        Tensor b_ih, b_hh, h0, c0;
        if (k.bias) b_ih = x[i++], b_hh = x[i++];
        if (k.init) {
          h0 = x[i++];
          if (lstm) c0 = x[i++];
        }
        const RnnLayerResult r = rnn_layer(k.mode, x[0], x[1], x[2], b_ih, b_hh, h0, c0, k.lengths, k.reverse);
        std::vector<Tensor> parts{r.output.reshape({-1}), r.h_n.reshape({-1})};
        if (lstm) parts.push_back(r.c_n.reshape({-1}));
        return cat(parts, 0);
      },
      dt == DType::Float32 ? 2e-4 : 1e-10};
  r.gradcheck = false;  // op_rows_nn.cpp's RNN rows check the derivatives
  r.strided = false;    // the layer copies strided operands first
  return r;
}

}  // namespace

void add_rnn_cell_rows(std::vector<OpRow>& t) {
  for (RnnMode m : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh, RnnMode::RnnRelu}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      t.push_back(rnn_row("bias_h0", {m, false, true, true, 4, 3, 5, 7, {}}, dt));
      t.push_back(rnn_row("reverse_h33", {m, true, false, false, 3, 2, 4, 33, {}}, dt));  // H past a warp
      t.push_back(rnn_row("padded", {m, false, true, false, 5, 3, 2, 6, {5, 2, 3}}, dt));
      t.push_back(rnn_row("reverse_padded_h0", {m, true, true, true, 4, 2, 3, 5, {1, 4}}, dt));
    }
  }
  // B * H = 300 units: more than a block's 256 threads.
  t.push_back(rnn_row("units_past_a_block", {RnnMode::Lstm, false, true, true, 2, 3, 4, 100, {}}, DType::Float32));
  t.push_back(rnn_row("units_past_a_block", {RnnMode::Gru, false, true, true, 2, 3, 4, 100, {}}, DType::Float32));
  // Bias gradients over 80 and 85 rows: two row slices.
  t.push_back(rnn_row("bias_rows_in_slices", {RnnMode::Gru, false, true, false, 20, 4, 3, 5, {}}, DType::Float64));
  t.push_back(
      rnn_row("reverse_bias_rows_in_slices", {RnnMode::Lstm, true, true, false, 17, 5, 2, 3, {}}, DType::Float32));
}

}  // namespace ember::ops_test
