// The CUDA recurrent layers (core/cuda/rnn.cu: fused LSTM/GRU/RNN cell kernels around the GEMM
// stub) run by the kernel emulator against the CPU kernels: forward (output, final states and
// the whole workspace) and backward (every gradient), for each mode, both directions, with and
// without biases and initial states, with padded sequences, and hidden sizes that are not
// multiples of the block, in all three thread orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/rnn_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class Rnn : public emu_test::EmulatedKernel {};

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

Tensor maybe_copy(const Tensor& t) {
  return t.defined() ? device_copy(t) : Tensor();
}

RnnWorkspace workspace(const RnnConfig& c, DType dt, bool device) {
  const int64_t G = rnn_gate_count(c.mode);
  auto make = [&](Shape s) { return device ? device_empty(s, dt) : empty(s, {.dtype = dt}); };
  RnnWorkspace ws;
  ws.gates = make({c.T, c.B, G * c.H});
  ws.hs = make({c.T + 1, c.B, c.H});
  if (c.mode == RnnMode::Lstm) ws.cs = make({c.T + 1, c.B, c.H});
  if (c.mode == RnnMode::Gru) ws.ghn = make({c.T, c.B, c.H});
  return ws;
}

void check_case(const Case& k, DType dt) {
  const double tol = dt == DType::Float32 ? 1e-4 : 1e-10;
  const std::string what = std::string(dtype_name(dt)) + " " + mode_name(k.mode) + (k.reverse ? " reverse" : "") +
                           (k.bias ? " bias" : "") + (k.init ? " h0" : "") + " T" + std::to_string(k.T) + " B" +
                           std::to_string(k.B) + " I" + std::to_string(k.I) + " H" + std::to_string(k.H) +
                           (k.lengths.empty() ? "" : " padded");
  SCOPED_TRACE(what);
  const int64_t G = rnn_gate_count(k.mode), GH = G * k.H;
  const bool lstm = k.mode == RnnMode::Lstm;
  RnnConfig cfg{k.mode, k.reverse, k.T, k.B, k.I, k.H, k.lengths};
  const TensorOptions o{.dtype = dt};

  RnnForwardArgs f;
  f.cfg = cfg;
  f.input = randn({k.T, k.B, k.I}, o);
  f.w_ih = randn({GH, k.I}, o) * 0.4;
  f.w_hh = randn({GH, k.H}, o) * 0.4;
  if (k.bias) f.b_ih = randn({GH}, o), f.b_hh = randn({GH}, o);
  if (k.init) {
    f.h0 = randn({k.B, k.H}, o);
    if (lstm) f.c0 = randn({k.B, k.H}, o);
  }
  RnnForwardArgs fd = f;
  fd.input = device_copy(f.input), fd.w_ih = device_copy(f.w_ih), fd.w_hh = device_copy(f.w_hh);
  fd.b_ih = maybe_copy(f.b_ih), fd.b_hh = maybe_copy(f.b_hh), fd.h0 = maybe_copy(f.h0), fd.c0 = maybe_copy(f.c0);
  f.output = empty({k.T, k.B, k.H}, o), f.h_n = empty({k.B, k.H}, o);
  fd.output = device_empty({k.T, k.B, k.H}, dt), fd.h_n = device_empty({k.B, k.H}, dt);
  if (lstm) f.c_n = empty({k.B, k.H}, o), fd.c_n = device_empty({k.B, k.H}, dt);
  f.ws = workspace(cfg, dt, false);
  fd.ws = workspace(cfg, dt, true);
  rnn_forward_stub(Device::cpu())(f);
  emu::kernel(rnn_forward_stub)(fd);
  expect_close(fd.output, f.output, tol, tol, "output");
  expect_close(fd.h_n, f.h_n, tol, tol, "h_n");
  if (lstm) expect_close(fd.c_n, f.c_n, tol, tol, "c_n");
  expect_close(fd.ws.hs, f.ws.hs, tol, tol, "hs");
  if (lstm) expect_close(fd.ws.cs, f.ws.cs, tol, tol, "cs");
  if (k.lengths.empty()) {  // padding rows of these are unspecified
    expect_close(fd.ws.gates, f.ws.gates, tol, tol, "gates");
    if (k.mode == RnnMode::Gru) expect_close(fd.ws.ghn, f.ws.ghn, tol, tol, "ghn");
  }

  RnnBackwardArgs b;
  b.cfg = cfg;
  b.input = f.input, b.w_ih = f.w_ih, b.w_hh = f.w_hh, b.ws = f.ws;
  b.grad_output = randn({k.T, k.B, k.H}, o);
  b.grad_h_n = randn({k.B, k.H}, o);
  if (lstm) b.grad_c_n = randn({k.B, k.H}, o);
  RnnBackwardArgs bd = b;
  bd.input = fd.input, bd.w_ih = fd.w_ih, bd.w_hh = fd.w_hh;
  bd.ws = RnnWorkspace{device_copy(f.ws.gates), device_copy(f.ws.hs), maybe_copy(f.ws.cs), maybe_copy(f.ws.ghn)};
  bd.grad_output = device_copy(b.grad_output), bd.grad_h_n = device_copy(b.grad_h_n);
  bd.grad_c_n = maybe_copy(b.grad_c_n);
  auto both = [&](Tensor RnnBackwardArgs::*field, Shape s) {
    b.*field = empty(s, o);
    bd.*field = device_empty(s, dt);
  };
  both(&RnnBackwardArgs::grad_input, {k.T, k.B, k.I});
  both(&RnnBackwardArgs::grad_w_ih, {GH, k.I});
  both(&RnnBackwardArgs::grad_w_hh, {GH, k.H});
  if (k.bias) {
    both(&RnnBackwardArgs::grad_b_ih, {GH});
    both(&RnnBackwardArgs::grad_b_hh, {GH});
  }
  if (k.init) {
    both(&RnnBackwardArgs::grad_h0, {k.B, k.H});
    if (lstm) both(&RnnBackwardArgs::grad_c0, {k.B, k.H});
  }
  rnn_backward_stub(Device::cpu())(b);
  emu::kernel(rnn_backward_stub)(bd);
  expect_close(bd.grad_input, b.grad_input, tol, tol, "grad_input");
  expect_close(bd.grad_w_ih, b.grad_w_ih, tol, tol, "grad_w_ih");
  expect_close(bd.grad_w_hh, b.grad_w_hh, tol, tol, "grad_w_hh");
  if (k.bias) {
    expect_close(bd.grad_b_ih, b.grad_b_ih, tol, tol, "grad_b_ih");
    expect_close(bd.grad_b_hh, b.grad_b_hh, tol, tol, "grad_b_hh");
  }
  if (k.init) {
    expect_close(bd.grad_h0, b.grad_h0, tol, tol, "grad_h0");
    if (lstm) expect_close(bd.grad_c0, b.grad_c0, tol, tol, "grad_c0");
  }
}

}  // namespace

TEST_P(Rnn, ForwardAndBackwardMatchTheCpu) {
  for (RnnMode m : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh, RnnMode::RnnRelu}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      check_case({m, false, true, true, 4, 3, 5, 7, {}}, dt);
      check_case({m, true, false, false, 3, 2, 4, 33, {}}, dt);        // H past a warp
      check_case({m, false, true, false, 5, 3, 2, 6, {5, 2, 3}}, dt);  // padded sequences
      check_case({m, true, true, true, 4, 2, 3, 5, {1, 4}}, dt);
    }
  }
}

TEST_P(Rnn, ManyUnitsSpanSeveralBlocks) {
  check_case({RnnMode::Lstm, false, true, true, 2, 3, 4, 100, {}}, DType::Float32);  // B*H = 300 > 256 threads
  check_case({RnnMode::Gru, false, true, true, 2, 3, 4, 100, {}}, DType::Float32);
}

TEST_P(Rnn, BiasGradientsOverManyStepsAreSplitIntoRowSlices) {
  check_case({RnnMode::Gru, false, true, false, 20, 4, 3, 5, {}}, DType::Float64);  // 80 rows: two slices
  check_case({RnnMode::Lstm, true, true, false, 17, 5, 2, 3, {}}, DType::Float32);  // 85 rows
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Rnn, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
