// A bidirectional recurrent layer on the emulated CUDA device runs each step of both directions
// as one batched GEMM and one cell launch (core/cuda/rnn.cu), forward and backward through time:
// its GEMM calls and kernel launches grow by one and two a step, as one direction's do, where
// running the directions one after the other grows them by two and four. Counted at 3 and 6
// steps, so that what runs once a call (biases, the input projection, the parameter gradients,
// the loss) cancels out. Its values and gradients equal the CPU's, whether the reverse direction's W_hh lies
// after the forward one's in memory (read in place) or before it (copied into one block first),
// with and without sequence lengths, for LSTM, GRU and the plain RNN. The values of every variant
// are also held to float64 compositions by the op table's rows (tests/ops/op_rows_rnn.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/emu/emu.h"
#include "core/cuda/emu/emu_device.h"
#include "core/dispatch.h"
#include "core/gemm_kernels.h"
#include "core/ops.h"
#include "core/ops/rnn.h"
#include "emu/emu_test_util.h"

using namespace ember;

namespace {

std::atomic<uint64_t> g_gemms{0};

void count_gemms(const void* stub, DeviceType t, int) {
  if (t == DeviceType::Emulated && (stub == &gemm_stub || stub == &gemm_batched_stub)) ++g_gemms;
}

// What the layer's forward and its backward each took on the device.
struct Work {
  uint64_t forward_gemms = 0, forward_launches = 0, backward_gemms = 0, backward_launches = 0;
};

struct Layer {
  RnnMode mode;
  int64_t T, B = 3, I = 5, H = 4;
  bool bidirectional = true;
  bool reverse_w_hh_first = false;  // the reverse direction's W_hh before the forward one's in memory
  std::vector<int64_t> lengths;
  DType dtype = DType::Float32;  // of the operands the layer sees (cast from float32 leaves)
};

// Runs the layer (weights from a fixed seed) on `dev`, returns its outputs and every gradient (on
// the CPU) and fills `work` with the GEMM calls and launches of its forward and backward.
std::vector<Tensor> run(const Layer& c, Device dev, Work* work) {
  manual_seed(3);
  const int64_t GH = (c.mode == RnnMode::Lstm ? 4 : c.mode == RnnMode::Gru ? 3 : 1) * c.H;
  const bool lstm = c.mode == RnnMode::Lstm;
  auto leaf = [&](Shape s) {
    Tensor t = sub(rand(std::move(s)), 0.5).to(dev);
    t.requires_grad_();
    return t;
  };
  Tensor x = leaf({c.T, c.B, c.I});
  // Both W_hh in one block, so that which lies first is the test's choice.
  Tensor w_hh = leaf({2, GH, c.H});
  RnnDirectionWeights w[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t slot = c.reverse_w_hh_first ? 1 - d : d;
    w[d] = {leaf({GH, c.I}), w_hh.select(0, slot), leaf({GH}),
            leaf({GH}),      leaf({c.B, c.H}),     lstm ? leaf({c.B, c.H}) : Tensor()};
  }
  auto as_dt = [&](const Tensor& t) { return t.defined() ? t.to(c.dtype) : t; };
  RnnDirectionWeights op[2];
  for (int d = 0; d < 2; ++d)
    op[d] = {as_dt(w[d].w_ih), as_dt(w[d].w_hh), as_dt(w[d].b_ih), as_dt(w[d].b_hh), as_dt(w[d].h0), as_dt(w[d].c0)};
  const Tensor xo = as_dt(x);
  const uint64_t launches0 = emu::stats().launches;
  g_gemms = 0;
  set_dispatch_observer(&count_gemms);
  std::vector<RnnLayerResult> r;
  if (c.bidirectional) {
    const auto both = rnn_layer_bidirectional(c.mode, xo, op[0], op[1], c.lengths);
    r.assign(both.begin(), both.end());
  } else {
    r.push_back(rnn_layer(c.mode, xo, op[0].w_ih, op[0].w_hh, op[0].b_ih, op[0].b_hh, op[0].h0, op[0].c0, c.lengths));
  }
  set_dispatch_observer(nullptr);
  work->forward_gemms = g_gemms, work->forward_launches = emu::stats().launches - launches0;
  // The loss's own ops launch as many kernels at any T: the difference between two T is the layer's.
  Tensor loss = zeros({}).to(dev);
  for (const RnnLayerResult& o : r) {
    const Tensor out = o.output.to(DType::Float32), c_n = o.c_n.defined() ? o.c_n.to(DType::Float32) : Tensor();
    loss = add(loss, sum(mul(out, out)));
    loss = add(loss, sum(o.h_n.to(DType::Float32)));
    if (c_n.defined()) loss = add(loss, sum(mul(c_n, c_n)));
  }
  const uint64_t launches1 = emu::stats().launches;
  g_gemms = 0;
  set_dispatch_observer(&count_gemms);
  loss.backward();
  set_dispatch_observer(nullptr);
  work->backward_gemms = g_gemms, work->backward_launches = emu::stats().launches - launches1;
  std::vector<Tensor> got;
  for (const RnnLayerResult& o : r)
    for (const Tensor& t : {o.output, o.h_n, o.c_n})
      if (t.defined()) got.push_back(t.detach().to(Device::cpu()).to(DType::Float32));
  for (const Tensor& t : {x, w_hh}) got.push_back(t.grad().to(Device::cpu()));
  for (const RnnDirectionWeights& d : w)
    for (const Tensor& t : {d.w_ih, d.b_ih, d.b_hh, d.h0, d.c0})
      if (t.defined() && t.grad().defined()) got.push_back(t.grad().to(Device::cpu()));
  return got;
}

std::string name_of(RnnMode m) {
  return m == RnnMode::Lstm ? "LSTM" : m == RnnMode::Gru ? "GRU" : "RNN_TANH";
}

}  // namespace

TEST(RnnDirectionsOnDevice, EachStepOfBothDirectionsIsOneGemmAndOneCellLaunch) {
  for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh})
    for (bool bi : {true, false}) {
      SCOPED_TRACE(name_of(mode) + (bi ? " bidirectional" : " one direction"));
      Layer shorter{mode, 3}, longer{mode, 6};
      shorter.bidirectional = longer.bidirectional = bi;
      Work a, b;
      run(shorter, emu::device(), &a);
      run(longer, emu::device(), &b);
      // Three more steps: one GEMM and one cell launch each, forward and backward.
      EXPECT_EQ(b.forward_gemms - a.forward_gemms, 3u);
      EXPECT_EQ(b.forward_launches - a.forward_launches, 6u);
      EXPECT_EQ(b.backward_gemms - a.backward_gemms, 3u);
      EXPECT_EQ(b.backward_launches - a.backward_launches, 6u);
    }
}

TEST(RnnDirectionsOnDevice, BothDirectionsAtOnceGiveTheCpusValuesAndGradients) {
  for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh})
    for (bool reverse_first : {false, true})
      for (bool lengths : {false, true}) {
        SCOPED_TRACE(name_of(mode) + (reverse_first ? ", reverse W_hh first" : "") + (lengths ? ", lengths" : ""));
        Layer c{mode, 5};
        c.reverse_w_hh_first = reverse_first;
        if (lengths) c.lengths = {5, 2, 4};
        Work dev_work, cpu_work;
        const std::vector<Tensor> got = run(c, emu::device(), &dev_work), want = run(c, Device::cpu(), &cpu_work);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(allclose(got[i], want[i], 1e-5, 1e-6)) << "result " << i;
      }
}

// The same in bfloat16 and float16 (autocast's layers on a GPU): the layer runs in float32 over
// float32 working copies of both directions' workspaces in one block (rnn_float32_args), the
// input-side GEMMs on the 16-bit operands; within 16-bit rounding of the CPU's 16-bit layer.
TEST(RnnDirectionsOnDevice, SixteenBitLayersRunBothDirectionsAtOnceToo) {
  for (DType dt : {DType::BFloat16, DType::Float16})
    for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru}) {
      SCOPED_TRACE(name_of(mode) + " in " + dtype_name(dt));
      Layer c{mode, 5, 3, 16, 8};
      c.dtype = dt;
      c.lengths = {5, 3, 4};
      Work dev_work, cpu_work, longer_work;
      const std::vector<Tensor> got = run(c, emu::device(), &dev_work), want = run(c, Device::cpu(), &cpu_work);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(allclose(got[i], want[i], 3e-2, 3e-2)) << "result " << i;
      Layer longer = c;
      longer.T = 8;
      longer.lengths = {8, 6, 7};
      run(longer, emu::device(), &longer_work);
      EXPECT_EQ(longer_work.forward_gemms - dev_work.forward_gemms, 3u);
      EXPECT_EQ(longer_work.backward_gemms - dev_work.backward_gemms, 3u);
    }
}
