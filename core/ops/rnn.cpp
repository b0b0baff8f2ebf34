#include "core/ops/rnn.h"

#include <string>
#include <utility>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
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

// One direction of a layer as the kernels see it: its checked forward arguments and outputs
// allocated (the workspaces, of all directions at once, by run_layer).
RnnForwardArgs forward_args(RnnMode mode, const Tensor& input, const Tensor& kernel_input, const RnnDirectionWeights& w,
                            const std::vector<int64_t>& lengths, bool reverse) {
  const bool lstm = mode == RnnMode::Lstm;
  RnnForwardArgs fa;
  fa.cfg = checked_config(mode, input, w.w_ih, w.w_hh, w.b_ih, w.b_hh, w.h0, w.c0, lengths, reverse);
  const int64_t T = fa.cfg.T, B = fa.cfg.B, H = fa.cfg.H;
  const TensorOptions opts{input.dtype(), input.device()};
  fa.input = kernel_input;
  fa.w_ih = kernel_operand(w.w_ih);
  fa.w_hh = kernel_operand(w.w_hh);
  fa.b_ih = kernel_operand(w.b_ih);
  fa.b_hh = kernel_operand(w.b_hh);
  fa.h0 = kernel_operand(w.h0);
  fa.c0 = kernel_operand(w.c0);
  fa.output = empty({T, B, H}, opts);
  fa.h_n = empty({B, H}, opts);
  if (lstm) fa.c_n = empty({B, H}, opts);
  return fa;
}

// What backward keeps of one direction: its configuration, the workspace its forward wrote and the
// weights it read (their versions checked when backward reads them).
struct SavedDirection {
  RnnConfig cfg;
  RnnWorkspace ws;
  autograd::SavedTensor w_ih, w_hh, b_ih, b_hh;
  bool has_h0, has_c0;
};

// The backward of run_layer's node: every direction's backward through time in one kernel call,
// the input's gradient summed over the directions. Gradients in the node's
// input order: r[0] the input's, r[1 + 6d + j] direction d's operand j (w_ih, w_hh, b_ih, b_hh, h0,
// c0).
std::vector<Tensor> layer_backward(const std::vector<SavedDirection>& saved, const Tensor& input, const Shape& in_shape,
                                   const TensorOptions& opts, bool lstm, const std::vector<Tensor>& g,
                                   const std::vector<bool>& needs) {
  const size_t D = saved.size(), outs = lstm ? 3 : 2;
  std::vector<Tensor> r(1 + 6 * D);
  std::vector<RnnBackwardArgs> ba(D);
  for (size_t d = 0; d < D; ++d) {
    const SavedDirection& s = saved[d];
    RnnBackwardArgs& b = ba[d];
    b.cfg = s.cfg;
    b.input = input;
    b.w_ih = s.w_ih.get();
    b.w_hh = s.w_hh.get();
    if (s.b_ih.defined()) b.b_ih = s.b_ih.get();
    if (s.b_hh.defined()) b.b_hh = s.b_hh.get();
    b.ws = s.ws;
    b.grad_output = g[outs * d].contiguous();
    b.grad_h_n = g[outs * d + 1].contiguous();
    if (lstm) b.grad_c_n = g[outs * d + 2].contiguous();
    const int64_t GH = rnn_gate_count(s.cfg.mode) * s.cfg.H, B = s.cfg.B, H = s.cfg.H;
    const size_t k = 1 + 6 * d;  // this direction's w_ih in the node's inputs, after the input
    if (needs[0]) b.grad_input = empty(in_shape, opts);
    if (needs[k]) r[k] = b.grad_w_ih = empty({GH, s.cfg.I}, opts);
    if (needs[k + 1]) r[k + 1] = b.grad_w_hh = empty({GH, H}, opts);
    if (needs[k + 2] && s.b_ih.defined()) r[k + 2] = b.grad_b_ih = empty({GH}, opts);
    if (needs[k + 3] && s.b_hh.defined()) r[k + 3] = b.grad_b_hh = empty({GH}, opts);
    if (needs[k + 4] && s.has_h0) r[k + 4] = b.grad_h0 = empty({B, H}, opts);
    if (needs[k + 5] && s.has_c0) r[k + 5] = b.grad_c0 = empty({B, H}, opts);
  }
  if (saved[0].cfg.B > 0) {
    rnn_backward_stub(opts.device)(ba);
  } else {  // nothing ran forward: the weights had no effect
    for (RnnBackwardArgs& b : ba)
      for (Tensor* t : {&b.grad_input, &b.grad_w_ih, &b.grad_w_hh, &b.grad_b_ih, &b.grad_b_hh, &b.grad_h0, &b.grad_c0})
        if (t->defined()) t->zero_();
  }
  if (needs[0]) {
    r[0] = ba[0].grad_input;
    for (size_t d = 1; d < D; ++d) r[0] = r[0] + ba[d].grad_input;  // as autograd sums (16-bit: out of place)
  }
  return r;
}

// One autograd node over every direction of the layer (one or two): inputs {input, then per
// direction w_ih, w_hh, b_ih, b_hh, h0, c0}, outputs per direction {output, h_n[, c_n]}.
std::vector<RnnLayerResult> run_layer(RnnMode mode, const Tensor& input,
                                      const std::vector<std::pair<const RnnDirectionWeights*, bool>>& dirs,
                                      const std::vector<int64_t>& lengths) {
  const bool lstm = mode == RnnMode::Lstm;
  const Tensor kernel_input = kernel_operand(input);
  std::vector<RnnForwardArgs> fa;
  for (const auto& [w, reverse] : dirs) fa.push_back(forward_args(mode, input, kernel_input, *w, lengths, reverse));
  const std::vector<RnnWorkspace> ws =
      rnn_workspaces(fa[0].cfg, fa.size(), {.dtype = input.dtype(), .device = input.device()});
  for (size_t d = 0; d < fa.size(); ++d) fa[d].ws = ws[d];
  if (fa[0].cfg.B > 0) rnn_forward_stub(input.device())(fa);

  std::vector<RnnLayerResult> res;
  std::vector<Tensor> inputs{input}, outputs;
  std::vector<SavedDirection> saved;
  for (size_t d = 0; d < fa.size(); ++d) {
    const RnnDirectionWeights& w = *dirs[d].first;
    res.push_back({fa[d].output, fa[d].h_n, fa[d].c_n});
    outputs.insert(outputs.end(), {fa[d].output, fa[d].h_n});
    if (lstm) outputs.push_back(fa[d].c_n);
    inputs.insert(inputs.end(), {w.w_ih, w.w_hh, w.b_ih, w.b_hh, w.h0, w.c0});
    saved.push_back({fa[d].cfg, fa[d].ws, autograd::SavedTensor(fa[d].w_ih), autograd::SavedTensor(fa[d].w_hh),
                     autograd::SavedTensor(fa[d].b_ih), autograd::SavedTensor(fa[d].b_hh), w.h0.defined(),
                     w.c0.defined()});
  }
  if (!autograd::any_requires_grad(inputs)) return res;
  autograd::record(backward_name(mode), inputs, outputs,
                   [saved, s_input = autograd::SavedTensor(kernel_input), in_shape = input.shape(),
                    opts = TensorOptions{input.dtype(), input.device()},
                    lstm](const std::vector<Tensor>& g, const std::vector<bool>& needs) {
                     return layer_backward(saved, s_input.get(), in_shape, opts, lstm, g, needs);
                   });
  return res;
}

}  // namespace

RnnLayerResult rnn_layer(RnnMode mode, const Tensor& input, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                         const Tensor& b_hh, const Tensor& h0, const Tensor& c0, const std::vector<int64_t>& lengths,
                         bool reverse) {
  if (auto c = autocast_args(AutocastOp::rnn_layer, input, w_ih, w_hh, b_ih, b_hh, h0, c0))
    return rnn_layer(mode, (*c)[0], (*c)[1], (*c)[2], (*c)[3], (*c)[4], (*c)[5], (*c)[6], lengths, reverse);
  const RnnDirectionWeights w{w_ih, w_hh, b_ih, b_hh, h0, c0};
  return run_layer(mode, input, {{&w, reverse}}, lengths)[0];
}

std::array<RnnLayerResult, 2> rnn_layer_bidirectional(RnnMode mode, const Tensor& input, const RnnDirectionWeights& fwd,
                                                      const RnnDirectionWeights& bwd,
                                                      const std::vector<int64_t>& lengths) {
  if (auto c = autocast_args(AutocastOp::rnn_layer, input, fwd.w_ih, fwd.w_hh, fwd.b_ih, fwd.b_hh, fwd.h0, fwd.c0,
                             bwd.w_ih, bwd.w_hh, bwd.b_ih, bwd.b_hh, bwd.h0, bwd.c0))
    return rnn_layer_bidirectional(mode, (*c)[0], {(*c)[1], (*c)[2], (*c)[3], (*c)[4], (*c)[5], (*c)[6]},
                                   {(*c)[7], (*c)[8], (*c)[9], (*c)[10], (*c)[11], (*c)[12]}, lengths);
  const std::vector<RnnLayerResult> r = run_layer(mode, input, {{&fwd, false}, {&bwd, true}}, lengths);
  return {r[0], r[1]};
}

}  // namespace ember
