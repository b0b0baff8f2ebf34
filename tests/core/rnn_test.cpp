// Tests for rnn_layer (core/ops/rnn.h): the float32 activations' accuracy from tiny to huge
// arguments (per element, against std::), the padding semantics of variable lengths (final states
// at each length, zero outputs, results and gradients independent of the padding), an empty batch,
// which operands get gradients, the autograd node and its version check, and every argument
// error. Every mode and option against PyTorch's equations composed from other ops, the widths
// that leave vector tails, a 2-layer bidirectional stack, float32 against float64 and the finite
// differences are op-table rows (tests/ops/op_rows_rnn.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/rnn_kernels.h"
#include "test_helpers.h"

namespace ember {
namespace {

using Vec = std::vector<double>;

const RnnMode kModes[] = {RnnMode::RnnTanh, RnnMode::RnnRelu, RnnMode::Lstm, RnnMode::Gru};

int64_t gates_of(RnnMode m) {
  return m == RnnMode::Lstm ? 4 : m == RnnMode::Gru ? 3 : 1;
}

const char* name_of(RnnMode m) {
  switch (m) {
    case RnnMode::RnnTanh:
      return "RNN_TANH";
    case RnnMode::RnnRelu:
      return "RNN_RELU";
    case RnnMode::Lstm:
      return "LSTM";
    default:
      return "GRU";
  }
}

double sig(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

struct Params {
  Vec w_ih, w_hh, b_ih, b_hh;  // empty biases: none
};

// ------------------------------------------------------------------ helpers

Vec random_vec(std::mt19937& rng, int64_t n, double scale) {
  std::uniform_real_distribution<double> u(-scale, scale);
  Vec v(static_cast<size_t>(n));
  for (double& e : v) e = u(rng);
  return v;
}

Tensor make(const Vec& v, Shape shape, DType dt, bool requires_grad = false) {
  Tensor t = from_vector<double>(v, std::move(shape), TensorOptions{dt});
  if (requires_grad) t.requires_grad_(true);
  return t;
}

Vec values(const Tensor& t) {
  return t.defined() ? t.contiguous().to_vector<double>() : Vec();
}

struct Case {
  RnnMode mode = RnnMode::Lstm;
  int64_t T = 4, B = 3, I = 3, H = 2;
  bool bias = true, init = true, reverse = false;
  std::vector<int64_t> lengths;
};

struct Data {
  Vec x, h0, c0;
  Params p;
};

Data make_data(const Case& c, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  const int64_t GH = gates_of(c.mode) * c.H;
  const double w = 1.0 / std::sqrt(static_cast<double>(c.H));  // PyTorch's init range
  Data d;
  d.x = random_vec(rng, c.T * c.B * c.I, scale);
  d.p.w_ih = random_vec(rng, GH * c.I, w * scale);
  d.p.w_hh = random_vec(rng, GH * c.H, w * scale);
  if (c.bias) {
    d.p.b_ih = random_vec(rng, GH, w * scale);
    d.p.b_hh = random_vec(rng, GH, w * scale);
  }
  if (c.init) {
    d.h0 = random_vec(rng, c.B * c.H, scale);
    if (c.mode == RnnMode::Lstm) d.c0 = random_vec(rng, c.B * c.H, scale);
  }
  return d;
}

// The layer's operands in the order rnn_layer takes them (undefined where absent).
std::vector<Tensor> tensors_of(const Case& c, const Data& d, DType dt, bool requires_grad) {
  const int64_t GH = gates_of(c.mode) * c.H;
  const bool lstm = c.mode == RnnMode::Lstm;
  auto opt = [&](bool present, const Vec& v, Shape shape) {
    return present ? make(v, std::move(shape), dt, requires_grad) : Tensor();
  };
  return {make(d.x, {c.T, c.B, c.I}, dt, requires_grad),
          make(d.p.w_ih, {GH, c.I}, dt, requires_grad),
          make(d.p.w_hh, {GH, c.H}, dt, requires_grad),
          opt(c.bias, d.p.b_ih, {GH}),
          opt(c.bias, d.p.b_hh, {GH}),
          opt(c.init, d.h0, {c.B, c.H}),
          opt(c.init && lstm, d.c0, {c.B, c.H})};
}

RnnLayerResult run(const Case& c, const std::vector<Tensor>& t) {
  return rnn_layer(c.mode, t[0], t[1], t[2], t[3], t[4], t[5], t[6], c.lengths, c.reverse);
}

// ------------------------------------------------------------------ values

TEST(RnnLayer, Float32ActivationsAreAccurateFromTinyToHugeArguments) {
  // One step, one unit, one sequence per argument x in the batch.
  Vec xs;
  for (double m = 1e-9; m < 200; m *= 1.37) {
    xs.push_back(m);
    xs.push_back(-m);
  }
  xs.push_back(0.0);
  const int64_t B = static_cast<int64_t>(xs.size());
  const DType f32 = DType::Float32;
  Tensor x = make(xs, {1, B, 1}, f32);
  // RNN_TANH with w_ih = 1, w_hh = 0: h = tanh(x).
  Vec th = values(rnn_layer(RnnMode::RnnTanh, x, make({1.0}, {1, 1}, f32), make({0.0}, {1, 1}, f32), Tensor(), Tensor(),
                            Tensor(), Tensor())
                      .output);
  // GRU with only the z row of w_ih set and h0 = 1: n = tanh(0) = 0, so h = (1 - z) n + z h0 = sigmoid(x).
  Vec sg = values(rnn_layer(RnnMode::Gru, x, make({0.0, 1.0, 0.0}, {3, 1}, f32), make({0.0, 0.0, 0.0}, {3, 1}, f32),
                            Tensor(), Tensor(), ones({B, 1}, {f32}), Tensor())
                      .output);
  for (int64_t b = 0; b < B; ++b) {
    const double v = static_cast<float>(xs[b]);
    EXPECT_LE(std::abs(th[b] - std::tanh(v)), 3e-7 * std::abs(std::tanh(v))) << "tanh(" << v << ")";
    // Below about -87 the true value is not a normal float any more.
    EXPECT_LE(std::abs(sg[b] - sig(v)), 3e-7 * sig(v) + 1e-37) << "sigmoid(" << v << ")";
  }
}

TEST(RnnLayer, VariableLengthsTakeFinalStatesAtEachLengthAndZeroThePadding) {
  const std::vector<int64_t> lengths{4, 1, 3};
  for (RnnMode mode : kModes)
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(name_of(mode)) + (reverse ? " reverse" : " forward"));
      Case c{mode, 4, 3, 3, 2, true, true, reverse, lengths};
      Data d = make_data(c, 3);
      RnnLayerResult r = run(c, tensors_of(c, d, DType::Float64, false));
      Vec out = values(r.output), hn = values(r.h_n);
      for (int64_t b = 0; b < 3; ++b) {
        // Forward ends at step len-1; reverse starts there and ends at step 0.
        const int64_t last = reverse ? 0 : lengths[b] - 1;
        for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(hn[b * 2 + j], out[(last * 3 + b) * 2 + j]) << "b=" << b;
        for (int64_t t = lengths[b]; t < 4; ++t)
          for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(out[(t * 3 + b) * 2 + j], 0.0) << "t=" << t << " b=" << b;
      }
      // A sequence's results do not depend on what its padding holds.
      Data d2 = d;
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t t = lengths[b]; t < 4; ++t)
          for (int64_t i = 0; i < 3; ++i) d2.x[(t * 3 + b) * 3 + i] = 100.0 + t;
      RnnLayerResult r2 = run(c, tensors_of(c, d2, DType::Float64, false));
      EXPECT_EQ(values(r2.output), out);
      EXPECT_EQ(values(r2.h_n), hn);
      EXPECT_EQ(values(r2.c_n), values(r.c_n));
    }
}

TEST(RnnLayer, EmptyBatch) {
  for (RnnMode mode : kModes) {
    Case c{mode, 3, 0, 2, 4, true, false, false, {}};
    Data d = make_data(c, 1);
    auto t = tensors_of(c, d, DType::Float64, true);
    RnnLayerResult r = run(c, t);
    EXPECT_EQ(r.output.shape(), (Shape{3, 0, 4}));
    EXPECT_EQ(r.h_n.shape(), (Shape{0, 4}));
    sum(r.output).add(sum(r.h_n)).backward();
    ASSERT_TRUE(t[2].grad().defined());
    for (double v : values(t[2].grad())) EXPECT_EQ(v, 0.0);
  }
}

// ------------------------------------------------------------------ both directions

// The threads the CPU recurrent kernels were dispatched from while the observer was set.
std::mutex g_rnn_mu;
std::set<std::thread::id> g_rnn_threads;
void observe_rnn(const void* stub, DeviceType, int) {
  if (stub != &rnn_forward_stub && stub != &rnn_backward_stub) return;
  std::lock_guard<std::mutex> lock(g_rnn_mu);
  g_rnn_threads.insert(std::this_thread::get_id());
}

// rnn_layer_bidirectional gives what rnn_layer gives per direction, values and gradients, and on
// two threads runs its directions on two threads (one each), forward and backward; on one, on the
// caller's.
TEST(RnnLayerBidirectional, EqualsOneCallPerDirectionAndRunsTheDirectionsAtOnceOnTwoThreads) {
  for (DType dt : {DType::Float32, DType::BFloat16})
    for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru})
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(name_of(mode)) + " at " + std::to_string(threads) + " thread(s) in " + dtype_name(dt));
        const double tol = dt == DType::Float32 ? 1e-5 : 1e-2;
        const test_util::ScopedThreads scoped(threads);
        Case f{mode, 5, 6, 3, 4, true, true, false, {5, 2, 4, 5, 1, 3}}, b = f;
        b.reverse = true;
        const Data df = make_data(f, 21), db = make_data(b, 22);
        std::vector<Vec> got, want;
        for (bool pair : {true, false}) {
          // float32 leaves, cast to dt on the way in as autocast does (16-bit leaves get no sums).
          auto tf = tensors_of(f, df, DType::Float32, true), tb = tensors_of(b, db, DType::Float32, true);
          tb[0] = tf[0];  // one input
          auto in_dt = [dt](std::vector<Tensor> t) {
            for (Tensor& x : t)
              if (x.defined()) x = x.to(dt);
            return t;
          };
          const std::vector<Tensor> of = in_dt(tf), ob = in_dt(tb);
          {
            std::lock_guard<std::mutex> lock(g_rnn_mu);
            g_rnn_threads.clear();
          }
          set_dispatch_observer(pair ? &observe_rnn : nullptr);
          RnnLayerResult r[2];
          if (pair) {
            const auto both = rnn_layer_bidirectional(mode, of[0], {of[1], of[2], of[3], of[4], of[5], of[6]},
                                                      {ob[1], ob[2], ob[3], ob[4], ob[5], ob[6]}, f.lengths);
            r[0] = both[0];
            r[1] = both[1];
          } else {
            r[0] = run(f, of);
            r[1] = run(b, ob);
          }
          auto f32 = [](const Tensor& t) { return t.to(DType::Float32); };
          Tensor loss = sum(mul(f32(r[0].output), f32(r[1].output)))
                            .add(sum(f32(r[0].h_n)))
                            .add(sum(mul(f32(r[1].h_n), f32(r[1].h_n))));
          loss.backward();
          set_dispatch_observer(nullptr);
          if (pair) {
            std::lock_guard<std::mutex> lock(g_rnn_mu);
            EXPECT_EQ(g_rnn_threads.size(), static_cast<size_t>(threads));
          }
          auto& out = pair ? got : want;
          for (const RnnLayerResult& x : r) out.insert(out.end(), {values(x.output), values(x.h_n), values(x.c_n)});
          for (const auto* ts : {&tf, &tb})
            for (const Tensor& t : *ts) out.push_back(values(t.defined() ? t.grad() : Tensor()));
        }
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(got[i].size(), want[i].size()) << "result " << i;
          for (size_t j = 0; j < got[i].size(); ++j)
            EXPECT_NEAR(got[i][j], want[i][j], tol * (1 + std::abs(want[i][j]))) << "result " << i << "[" << j << "]";
        }
      }
}

// ------------------------------------------------------------------ gradients

TEST(RnnLayerGrad, PaddingStepsGetAndGiveNoGradient) {
  const std::vector<int64_t> lengths{3, 1, 4};
  for (RnnMode mode : kModes)
    for (bool reverse : {false, true}) {
      SCOPED_TRACE(std::string(name_of(mode)) + (reverse ? " reverse" : " forward"));
      Case c{mode, 4, 3, 2, 3, true, true, reverse, lengths};
      Data d = make_data(c, 8);
      std::mt19937 rng(99);
      Vec proj = random_vec(rng, 4 * 3 * 3, 1.0);
      Vec proj_masked = proj;  // the same weights with the padding positions zeroed
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t t = lengths[b]; t < 4; ++t)
          for (int64_t j = 0; j < 3; ++j) proj_masked[(t * 3 + b) * 3 + j] = 0.0;
      std::vector<Vec> grads[2];
      for (int k = 0; k < 2; ++k) {
        auto t = tensors_of(c, d, DType::Float64, true);
        RnnLayerResult r = run(c, t);
        Tensor p = make(k == 0 ? proj : proj_masked, {4, 3, 3}, DType::Float64);
        Tensor loss = sum(mul(r.output, p)).add(sum(r.h_n));
        if (r.c_n.defined()) loss = loss.add(sum(r.c_n));
        loss.backward();
        for (const Tensor& in : t) grads[k].push_back(values(in.defined() ? in.grad() : Tensor()));
      }
      for (size_t i = 0; i < grads[0].size(); ++i) EXPECT_EQ(grads[0][i], grads[1][i]) << "operand " << i;
      const Vec& dx = grads[0][0];
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t t = 0; t < 4; ++t)
          for (int64_t i = 0; i < 2; ++i) {
            double v = dx[(t * 3 + b) * 2 + i];
            if (t >= lengths[b]) {
              EXPECT_EQ(v, 0.0) << "t=" << t << " b=" << b;
            } else if (mode != RnnMode::RnnRelu) {  // (a ReLU step may be dead everywhere)
              EXPECT_NE(v, 0.0) << "t=" << t << " b=" << b;
            }
          }
    }
}

TEST(RnnLayerGrad, OnlyTheOperandsThatRequireGradGetOne) {
  Case c{RnnMode::Lstm, 3, 2, 3, 2, true, true, false, {3, 2}};
  Data d = make_data(c, 17);
  auto all = tensors_of(c, d, DType::Float64, true);
  auto loss_of = [&c](const std::vector<Tensor>& t) {
    RnnLayerResult r = run(c, t);
    return sum(r.output).add(sum(r.c_n));
  };
  loss_of(all).backward();
  auto some = tensors_of(c, d, DType::Float64, false);
  some[2].requires_grad_(true);  // w_hh
  some[6].requires_grad_(true);  // c0
  loss_of(some).backward();
  EXPECT_EQ(values(some[2].grad()), values(all[2].grad()));
  EXPECT_EQ(values(some[6].grad()), values(all[6].grad()));
  for (int i : {0, 1, 3, 4, 5}) EXPECT_FALSE(some[i].grad().defined()) << i;
}

TEST(RnnLayerGrad, NoHistoryWithoutGradOrUnderNoGradGuard) {
  Case c{RnnMode::Gru, 2, 2, 2, 2, true, true, false, {}};
  Data d = make_data(c, 2);
  RnnLayerResult r = run(c, tensors_of(c, d, DType::Float32, false));
  EXPECT_FALSE(r.output.requires_grad());
  EXPECT_EQ(r.output.grad_fn(), nullptr);
  auto t = tensors_of(c, d, DType::Float32, true);
  {
    NoGradGuard ng;
    EXPECT_FALSE(run(c, t).h_n.requires_grad());
  }
  RnnLayerResult g = run(c, t);
  ASSERT_NE(g.output.grad_fn(), nullptr);
  EXPECT_EQ(g.output.grad_fn()->name(), "GruBackward");
  EXPECT_EQ(g.output.grad_fn(), g.h_n.grad_fn());
}

TEST(RnnLayerGrad, WeightChangedInPlaceAfterForwardIsReported) {
  Case c{RnnMode::Lstm, 2, 2, 2, 2, true, true, false, {}};
  Data d = make_data(c, 2);
  auto t = tensors_of(c, d, DType::Float32, true);
  RnnLayerResult r = run(c, t);
  {
    NoGradGuard ng;
    t[2].add_(1.0);
  }
  EXPECT_THROW(sum(r.output).backward(), Error);
}

// ------------------------------------------------------------------ errors

void expect_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("rnn_layer"), std::string::npos) << msg;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
  }
}

TEST(RnnLayerErrors, EveryBadArgumentIsReported) {
  Case c{RnnMode::Lstm, 3, 2, 4, 5, true, true, false, {}};
  Data d = make_data(c, 1);
  auto t = tensors_of(c, d, DType::Float32, false);
  auto call = [&](std::vector<Tensor> a, RnnMode mode = RnnMode::Lstm, std::vector<int64_t> lengths = {}) {
    return [a, mode, lengths] { rnn_layer(mode, a[0], a[1], a[2], a[3], a[4], a[5], a[6], lengths); };
  };
  auto with = [&](int i, Tensor v) {
    auto a = t;
    a[i] = v;
    return a;
  };
  const TensorOptions f32{DType::Float32}, f64{DType::Float64};
  expect_error(call(with(0, zeros({3, 4}, f32))), "[T, B, I]");
  expect_error(call(with(0, zeros({3, 2, 4}, {DType::Int32}))), "float64, float16 or bfloat16");
  expect_error(call(with(0, zeros({0, 2, 4}, f32))), "at least one time step");
  expect_error(call(with(0, Tensor())), "must be defined");
  expect_error(call(with(2, zeros({15, 5}, f32))), "w_hh");     // 3*H rows for LSTM
  expect_error(call(with(2, zeros({20, 5, 1}, f32))), "w_hh");  // not 2-D
  expect_error(call(with(1, zeros({20, 3}, f32))), "w_ih must have shape [20, 4]");
  expect_error(call(with(3, zeros({19}, f32))), "b_ih must have shape [20]");
  expect_error(call(with(4, zeros({20, 1}, f32))), "b_hh must have shape [20]");
  expect_error(call(with(5, zeros({3, 5}, f32))), "h0 must have shape [2, 5]");
  expect_error(call(with(6, zeros({2, 4}, f32))), "c0 must have shape [2, 5]");
  expect_error(call(with(1, zeros({20, 4}, f64))), "same dtype");
  expect_error(call(with(5, zeros({2, 5}, f64))), "same dtype");
  expect_error(call(with(6, zeros({2, 5}, f64))), "same dtype");
  expect_error(call(t, RnnMode::Lstm, {3}), "lengths has 1 entries but the batch size is 2");
  expect_error(call(t, RnnMode::Lstm, {3, 0}), "lengths[1] = 0 is out of range");
  expect_error(call(t, RnnMode::Lstm, {4, 3}), "lengths[0] = 4 is out of range");
  // c0 only belongs to LSTM; GRU weights have 3*H rows
  auto gru = t;
  gru[1] = zeros({15, 4}, f32);
  gru[2] = zeros({15, 5}, f32);
  gru[3] = gru[4] = zeros({15}, f32);
  expect_error(call(gru, RnnMode::Gru), "c0 is only for LSTM");
  gru[6] = Tensor();
  EXPECT_NO_THROW(call(gru, RnnMode::Gru)());
  expect_error(call(gru, RnnMode::RnnTanh), "w_hh");
}

// Either direction's bad operand is reported as rnn_layer reports it, before anything runs.
TEST(RnnLayerErrors, EitherDirectionOfTheBidirectionalLayerIsChecked) {
  Case c{RnnMode::Lstm, 3, 2, 4, 5, true, true, false, {}};
  Data d = make_data(c, 1);
  auto t = tensors_of(c, d, DType::Float32, false);
  const RnnDirectionWeights good{t[1], t[2], t[3], t[4], t[5], t[6]};
  RnnDirectionWeights bad = good;
  bad.w_hh = zeros({15, 5}, {DType::Float32});  // 3*H rows for an LSTM
  expect_error([&] { rnn_layer_bidirectional(RnnMode::Lstm, t[0], good, bad); }, "w_hh");
  expect_error([&] { rnn_layer_bidirectional(RnnMode::Lstm, t[0], bad, good); }, "w_hh");
  expect_error([&] { rnn_layer_bidirectional(RnnMode::Lstm, t[0], good, good, {3, 4}); }, "lengths[1] = 4");
}

}  // namespace
}  // namespace ember
