#include "core/ops/rnn.h"

#include <string>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/rnn_kernels.h"

namespace ember {

namespace {

const char* mode_name(RnnMode mode) {
  switch (mode) {
    case RnnMode::RnnTanh:
      return "RNN_TANH";
    case RnnMode::RnnRelu:
      return "RNN_RELU";
    case RnnMode::Lstm:
      return "LSTM";
    case RnnMode::Gru:
      return "GRU";
  }
  return "?";
}

const char* backward_name(RnnMode mode) {
  switch (mode) {
    case RnnMode::Lstm:
      return "LstmBackward";
    case RnnMode::Gru:
      return "GruBackward";
    default:
      return "RnnBackward";
  }
}

// Checks one optional or required operand's shape, dtype and device against the input's.
void check_operand(const Tensor& t, const char* name, const Shape& expected, const Tensor& input, RnnMode mode,
                   const char* why) {
  EMBER_CHECK(t.shape() == expected, "rnn_layer: ", name, " must have shape ", shape_str(expected), " (", why, ") for ",
              mode_name(mode), ", got ", shape_str(t.shape()));
  EMBER_CHECK(t.dtype() == input.dtype(), "rnn_layer: ", name, " has dtype ", dtype_name(t.dtype()),
              " but the input has dtype ", dtype_name(input.dtype()), "; all operands must have the same dtype");
  EMBER_CHECK(t.device() == input.device(), "rnn_layer: ", name, " is on ", t.device(), " but the input is on ",
              input.device(), "; all operands must be on the same device");
}

// The contiguous, history-free operand the kernel reads (no copy when already contiguous, so a
// SavedTensor of it still sees in-place changes to the caller's tensor).
Tensor kernel_operand(const Tensor& t) {
  if (!t.defined()) return t;
  NoGradGuard ng;
  return t.detach().contiguous();
}

// The layer's configuration, once every operand has been checked against the input and the mode
// (shapes, dtypes, devices) and the lengths against the batch and the steps; lengths all equal to
// T are dropped (the kernels' fast path).
RnnConfig checked_config(RnnMode mode, const Tensor& input, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                         const Tensor& b_hh, const Tensor& h0, const Tensor& c0, const std::vector<int64_t>& lengths,
                         bool reverse) {
  const int64_t G = rnn_gate_count(mode);
  EMBER_CHECK(input.defined() && w_ih.defined() && w_hh.defined(),
              "rnn_layer: input, w_ih and w_hh must be defined tensors");
  EMBER_CHECK(input.dim() == 3, "rnn_layer: expected input of shape [T, B, I] (3 dims, time-major), got ",
              shape_str(input.shape()));
  // float16/bfloat16 too: autocast runs the layers' GEMMs in them (core/ops/autocast_table.h).
  EMBER_CHECK(is_floating(input.dtype()), "rnn_layer: expected a float32, float64, float16 or bfloat16 input, got ",
              dtype_name(input.dtype()));
  const int64_t T = input.size(0), B = input.size(1), I = input.size(2);
  EMBER_CHECK(T >= 1, "rnn_layer: the input must have at least one time step, got shape ", shape_str(input.shape()));
  EMBER_CHECK(w_hh.dim() == 2 && w_hh.size(1) >= 1 && w_hh.size(0) == G * w_hh.size(1), "rnn_layer: w_hh must have ",
              "shape [", G, "*H, H] with H >= 1 for ", mode_name(mode), ", got ", shape_str(w_hh.shape()));
  const int64_t H = w_hh.size(1), GH = G * H;
  const std::string gates_why = std::to_string(G) + "*H with hidden size H = " + std::to_string(H);
  check_operand(w_hh, "w_hh", {GH, H}, input, mode, gates_why.c_str());
  check_operand(w_ih, "w_ih", {GH, I}, input, mode, (gates_why + ", input size " + std::to_string(I)).c_str());
  if (b_ih.defined()) check_operand(b_ih, "b_ih", {GH}, input, mode, gates_why.c_str());
  if (b_hh.defined()) check_operand(b_hh, "b_hh", {GH}, input, mode, gates_why.c_str());
  if (h0.defined()) check_operand(h0, "h0", {B, H}, input, mode, "[batch, hidden]");
  EMBER_CHECK(!c0.defined() || mode == RnnMode::Lstm, "rnn_layer: c0 is only for LSTM, but the mode is ",
              mode_name(mode));
  if (c0.defined()) check_operand(c0, "c0", {B, H}, input, mode, "[batch, hidden]");

  RnnConfig cfg{mode, reverse, T, B, I, H, {}};
  if (!lengths.empty()) {
    EMBER_CHECK(static_cast<int64_t>(lengths.size()) == B, "rnn_layer: lengths has ", lengths.size(),
                " entries but the batch size is ", B);
    bool all_full = true;
    for (size_t b = 0; b < lengths.size(); ++b) {
      EMBER_CHECK(lengths[b] >= 1 && lengths[b] <= T, "rnn_layer: lengths[", b, "] = ", lengths[b],
                  " is out of range; every length must be in [1, ", T, "] (the number of time steps)");
      all_full = all_full && lengths[b] == T;
    }
    if (!all_full) cfg.lengths = lengths;
  }
  return cfg;
}

}  // namespace

RnnLayerResult rnn_layer(RnnMode mode, const Tensor& input, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                         const Tensor& b_hh, const Tensor& h0, const Tensor& c0, const std::vector<int64_t>& lengths,
                         bool reverse) {
  if (auto c = autocast_args(AutocastOp::rnn_layer, input, w_ih, w_hh, b_ih, b_hh, h0, c0))
    return rnn_layer(mode, (*c)[0], (*c)[1], (*c)[2], (*c)[3], (*c)[4], (*c)[5], (*c)[6], lengths, reverse);
  const bool lstm = mode == RnnMode::Lstm;
  const RnnConfig cfg = checked_config(mode, input, w_ih, w_hh, b_ih, b_hh, h0, c0, lengths, reverse);
  const int64_t T = cfg.T, B = cfg.B, H = cfg.H, GH = rnn_gate_count(mode) * H;
  const TensorOptions opts{input.dtype(), input.device()};
  RnnForwardArgs fa;
  fa.cfg = cfg;
  fa.input = kernel_operand(input);
  fa.w_ih = kernel_operand(w_ih);
  fa.w_hh = kernel_operand(w_hh);
  fa.b_ih = kernel_operand(b_ih);
  fa.b_hh = kernel_operand(b_hh);
  fa.h0 = kernel_operand(h0);
  fa.c0 = kernel_operand(c0);
  fa.output = empty({T, B, H}, opts);
  fa.h_n = empty({B, H}, opts);
  if (lstm) fa.c_n = empty({B, H}, opts);
  fa.ws.gates = empty({T, B, GH}, opts);
  fa.ws.hs = empty({T + 1, B, H}, opts);
  if (lstm) fa.ws.cs = empty({T + 1, B, H}, opts);
  if (mode == RnnMode::Gru) fa.ws.ghn = empty({T, B, H}, opts);
  if (B > 0) {
    rnn_forward_stub(input.device())(fa);
  }

  RnnLayerResult res{fa.output, fa.h_n, fa.c_n};
  std::vector<Tensor> outputs{res.output, res.h_n};
  if (lstm) outputs.push_back(res.c_n);
  if (!autograd::any_requires_grad({input, w_ih, w_hh, b_ih, b_hh, h0, c0})) return res;

  autograd::SavedTensor s_input(fa.input), s_w_ih(fa.w_ih), s_w_hh(fa.w_hh), s_b_ih(fa.b_ih), s_b_hh(fa.b_hh);
  Shape in_shape = input.shape();
  const bool has_h0 = h0.defined(), has_c0 = c0.defined(), has_b_ih = b_ih.defined(), has_b_hh = b_hh.defined();
  RnnWorkspace ws = fa.ws;
  autograd::record(backward_name(mode), {input, w_ih, w_hh, b_ih, b_hh, h0, c0}, outputs,
                   [cfg, ws, s_input, s_w_ih, s_w_hh, s_b_ih, s_b_hh, in_shape, opts, lstm, has_h0, has_c0, has_b_ih,
                    has_b_hh](const std::vector<Tensor>& g, const std::vector<bool>& needs) -> std::vector<Tensor> {
                     std::vector<Tensor> r(7);
                     RnnBackwardArgs ba;
                     ba.cfg = cfg;
                     ba.input = s_input.get();
                     ba.w_ih = s_w_ih.get();
                     ba.w_hh = s_w_hh.get();
                     if (s_b_ih.defined()) ba.b_ih = s_b_ih.get();
                     if (s_b_hh.defined()) ba.b_hh = s_b_hh.get();
                     ba.ws = ws;
                     ba.grad_output = g[0].contiguous();
                     ba.grad_h_n = g[1].contiguous();
                     if (lstm) ba.grad_c_n = g[2].contiguous();
                     const int64_t GH = rnn_gate_count(cfg.mode) * cfg.H;
                     if (needs[0]) r[0] = ba.grad_input = empty(in_shape, opts);
                     if (needs[1]) r[1] = ba.grad_w_ih = empty({GH, cfg.I}, opts);
                     if (needs[2]) r[2] = ba.grad_w_hh = empty({GH, cfg.H}, opts);
                     if (needs[3] && has_b_ih) r[3] = ba.grad_b_ih = empty({GH}, opts);
                     if (needs[4] && has_b_hh) r[4] = ba.grad_b_hh = empty({GH}, opts);
                     if (needs[5] && has_h0) r[5] = ba.grad_h0 = empty({cfg.B, cfg.H}, opts);
                     if (needs[6] && has_c0) r[6] = ba.grad_c0 = empty({cfg.B, cfg.H}, opts);
                     if (cfg.B > 0) {
                       rnn_backward_stub(opts.device)(ba);
                     } else {  // nothing ran forward: the weights had no effect
                       for (Tensor& t : r)
                         if (t.defined()) t.zero_();
                     }
                     return r;
                   });
  return res;
}

}  // namespace ember
