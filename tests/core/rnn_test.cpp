// Tests for rnn_layer (core/ops/rnn.h): values against a naive per-step float64 reference written
// from PyTorch's formulas, gradient checks for every mode and option, padding semantics of
// variable lengths, a 2-layer bidirectional stack built from rnn_layer calls (as nn::LSTM/GRU
// compose it), and every argument error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/autograd/node.h"
#include "core/ops.h"

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

// ------------------------------------------------------------------ float64 reference

double sig(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

struct Params {
  Vec w_ih, w_hh, b_ih, b_hh;  // empty biases: none
};

struct RefOut {
  Vec out, h_n, c_n;
};

// One layer, one direction, per sequence and per step, exactly as torch.nn.RNN/LSTM/GRU define it.
RefOut ref_layer(RnnMode mode, const Vec& x, int64_t T, int64_t B, int64_t I, int64_t H, const Params& p, const Vec& h0,
                 const Vec& c0, const std::vector<int64_t>& lengths, bool reverse) {
  const int64_t G = gates_of(mode);
  RefOut r{Vec(T * B * H, 0.0), Vec(B * H, 0.0), Vec(B * H, 0.0)};
  for (int64_t b = 0; b < B; ++b) {
    Vec h(H, 0.0), c(H, 0.0);
    if (!h0.empty()) std::copy(h0.begin() + b * H, h0.begin() + (b + 1) * H, h.begin());
    if (!c0.empty()) std::copy(c0.begin() + b * H, c0.begin() + (b + 1) * H, c.begin());
    const int64_t len = lengths.empty() ? T : lengths[b];
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = reverse ? len - 1 - s : s;
      Vec gi(G * H, 0.0), gh(G * H, 0.0);
      for (int64_t k = 0; k < G * H; ++k) {
        for (int64_t i = 0; i < I; ++i) gi[k] += p.w_ih[k * I + i] * x[(t * B + b) * I + i];
        for (int64_t j = 0; j < H; ++j) gh[k] += p.w_hh[k * H + j] * h[j];
        if (!p.b_ih.empty()) gi[k] += p.b_ih[k];
        if (!p.b_hh.empty()) gh[k] += p.b_hh[k];
      }
      Vec hn(H);
      for (int64_t j = 0; j < H; ++j) {
        switch (mode) {
          case RnnMode::RnnTanh:
            hn[j] = std::tanh(gi[j] + gh[j]);
            break;
          case RnnMode::RnnRelu:
            hn[j] = std::max(0.0, gi[j] + gh[j]);
            break;
          case RnnMode::Lstm: {
            double ig = sig(gi[j] + gh[j]), fg = sig(gi[H + j] + gh[H + j]);
            double gg = std::tanh(gi[2 * H + j] + gh[2 * H + j]), og = sig(gi[3 * H + j] + gh[3 * H + j]);
            c[j] = fg * c[j] + ig * gg;
            hn[j] = og * std::tanh(c[j]);
            break;
          }
          case RnnMode::Gru: {
            double rg = sig(gi[j] + gh[j]), zg = sig(gi[H + j] + gh[H + j]);
            double ng = std::tanh(gi[2 * H + j] + rg * gh[2 * H + j]);
            hn[j] = (1 - zg) * ng + zg * h[j];
            break;
          }
        }
      }
      h = hn;
      for (int64_t j = 0; j < H; ++j) r.out[(t * B + b) * H + j] = h[j];
    }
    for (int64_t j = 0; j < H; ++j) {
      r.h_n[b * H + j] = h[j];
      r.c_n[b * H + j] = c[j];
    }
  }
  return r;
}

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

void expect_near_vec(const Vec& got, const Vec& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::abs(got[i] - want[i]) / (1.0 + std::abs(want[i]));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " got " << got[at] << " want " << want[at];
}

struct Case {
  RnnMode mode = RnnMode::Lstm;
  int64_t T = 4, B = 3, I = 3, H = 2;
  bool bias = true, init = true, reverse = false;
  std::vector<int64_t> lengths;
  std::string str() const {
    std::string s = std::string(name_of(mode)) + " T" + std::to_string(T) + " B" + std::to_string(B) + " I" +
                    std::to_string(I) + " H" + std::to_string(H) + (bias ? " bias" : " nobias") +
                    (init ? " h0" : " noh0") + (reverse ? " reverse" : " forward") + " lengths[";
    for (int64_t l : lengths) s += std::to_string(l) + ",";
    return s + "]";
  }
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

// Every result of a layer as one flat tensor, so that gradcheck sees all of them.
Tensor flat_results(const RnnLayerResult& r) {
  std::vector<Tensor> parts{r.output.reshape({-1}), r.h_n.reshape({-1})};
  if (r.c_n.defined()) parts.push_back(r.c_n.reshape({-1}));
  return cat(parts, 0);
}

// B lengths in [1, T], mixed, at least one of them T.
std::vector<int64_t> spread_lengths(int64_t B, int64_t T) {
  std::vector<int64_t> l(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) l[b] = b == 0 ? T : 1 + (b * 5) % T;
  return l;
}

std::vector<Case> all_variants(RnnMode mode, int64_t T, int64_t B, int64_t I, int64_t H,
                               const std::vector<int64_t>& lengths) {
  std::vector<Case> cases;
  for (bool bias : {true, false})
    for (bool init : {true, false})
      for (bool reverse : {false, true})
        for (bool var : {false, true})
          cases.push_back({mode, T, B, I, H, bias, init, reverse, var ? lengths : std::vector<int64_t>{}});
  return cases;
}

// ------------------------------------------------------------------ values

void check_against_reference(const Case& c, DType dt, double tol, double scale = 1.0, uint32_t seed = 7) {
  SCOPED_TRACE(c.str() + (dt == DType::Float32 ? " float32" : " float64"));
  Data d = make_data(c, seed, scale);
  RefOut want = ref_layer(c.mode, d.x, c.T, c.B, c.I, c.H, d.p, d.h0, d.c0, c.lengths, c.reverse);
  RnnLayerResult got = run(c, tensors_of(c, d, dt, false));
  ASSERT_EQ(got.output.shape(), (Shape{c.T, c.B, c.H}));
  ASSERT_EQ(got.h_n.shape(), (Shape{c.B, c.H}));
  EXPECT_EQ(got.output.dtype(), dt);
  expect_near_vec(values(got.output), want.out, tol, "output");
  expect_near_vec(values(got.h_n), want.h_n, tol, "h_n");
  if (c.mode == RnnMode::Lstm) {
    ASSERT_TRUE(got.c_n.defined());
    expect_near_vec(values(got.c_n), want.c_n, tol, "c_n");
  } else {
    EXPECT_FALSE(got.c_n.defined());
  }
}

TEST(RnnLayer, MatchesReferenceEveryModeAndOption) {
  for (RnnMode mode : kModes)
    for (const Case& c : all_variants(mode, 5, 4, 3, 5, {5, 2, 4, 1})) {
      check_against_reference(c, DType::Float64, 1e-12);
      check_against_reference(c, DType::Float32, 3e-6);
    }
}

TEST(RnnLayer, MatchesReferenceAtWidthsThatLeaveVectorTails) {
  // H = 37 and I = 19 are not multiples of any vector or panel width, and the sizes are large
  // enough for the recurrent loop to split the hidden units across threads; larger weights drive
  // the gates into saturation, where the float32 activations must still be accurate.
  for (RnnMode mode : kModes) {
    Case c{mode, 5, 192, 19, 37, true, true, true, spread_lengths(192, 5)};
    check_against_reference(c, DType::Float32, 1e-5, 1.0, 11);
    check_against_reference(c, DType::Float32, 4e-5, 4.0, 12);
    c.reverse = false;
    check_against_reference(c, DType::Float64, 1e-12, 4.0, 13);
  }
}

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

TEST(RnnLayer, LengthsAllEqualToTMatchNoLengths) {
  Case c{RnnMode::Gru, 3, 2, 3, 4, true, true, true, {}};
  Data d = make_data(c, 5);
  auto t = tensors_of(c, d, DType::Float32, false);
  RnnLayerResult a = run(c, t);
  RnnLayerResult b = rnn_layer(c.mode, t[0], t[1], t[2], t[3], t[4], t[5], t[6], {3, 3}, true);
  EXPECT_EQ(values(a.output), values(b.output));
  EXPECT_EQ(values(a.h_n), values(b.h_n));
}

TEST(RnnLayer, NonContiguousOperandsGiveTheSameResults) {
  // batch-first input seen time-major through a transpose, and a transposed weight view
  Case c{RnnMode::Lstm, 4, 3, 5, 3, true, true, false, {4, 2, 3}};
  Data d = make_data(c, 9);
  auto t = tensors_of(c, d, DType::Float32, false);
  RnnLayerResult want = run(c, t);
  Tensor x_bf = t[0].transpose(0, 1).contiguous();  // [B, T, I]
  Tensor w_hh_t = t[2].t().contiguous().t();        // same values, column-major
  ASSERT_FALSE(w_hh_t.is_contiguous());
  RnnLayerResult got = rnn_layer(c.mode, x_bf.transpose(0, 1), t[1], w_hh_t, t[3], t[4], t[5], t[6], c.lengths);
  EXPECT_EQ(values(got.output), values(want.output));
  EXPECT_EQ(values(got.h_n), values(want.h_n));
  EXPECT_EQ(values(got.c_n), values(want.c_n));
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

// ------------------------------------------------------------------ gradients

void expect_gradcheck(const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.str());
  Data d = make_data(c, seed);
  auto inputs = tensors_of(c, d, DType::Float64, true);
  auto fn = [&c](const std::vector<Tensor>& t) { return flat_results(run(c, t)); };
  GradcheckResult r = gradcheck(fn, inputs);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(RnnLayerGrad, GradcheckEveryModeWithVariableLengthsAndReverse) {
  for (RnnMode mode : kModes)
    for (const Case& c : all_variants(mode, 4, 3, 3, 2, {2, 4, 1})) {
      if (!c.bias && !c.init && c.lengths.empty()) continue;  // covered by the richer variants
      expect_gradcheck(c, 21);
    }
}

TEST(RnnLayerGrad, ReluGradcheckAwayFromTheKink) {
  // Positive weights and inputs keep every pre-activation clear of 0, where ReLU has no derivative,
  // so the central differences are exact.
  Case c{RnnMode::RnnRelu, 4, 3, 3, 2, true, true, true, {3, 4, 2}};
  Data d = make_data(c, 4);
  for (Vec* v : {&d.x, &d.p.w_ih, &d.p.w_hh, &d.p.b_ih, &d.p.b_hh, &d.h0})
    for (double& e : *v) e = 0.1 + std::abs(e);
  auto inputs = tensors_of(c, d, DType::Float64, true);
  GradcheckResult r = gradcheck([&c](const std::vector<Tensor>& t) { return flat_results(run(c, t)); }, inputs);
  EXPECT_TRUE(r.ok) << r.message;
}

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

TEST(RnnLayerGrad, Float32BackwardMatchesFloat64) {
  // The float32 path has its own exp/tanh and GEMM kernel; at widths with vector and panel tails,
  // with the hidden units split across threads, its gradients must agree with float64's.
  for (RnnMode mode : kModes) {
    SCOPED_TRACE(name_of(mode));
    Case c{mode, 5, 192, 11, 37, true, true, true, spread_lengths(192, 5)};
    Data d = make_data(c, 31, 1.5);
    std::vector<Vec> grads[2];
    for (DType dt : {DType::Float64, DType::Float32}) {
      auto t = tensors_of(c, d, dt, true);
      RnnLayerResult r = run(c, t);
      Tensor loss = sum(mul(r.output, r.output)).add(sum(r.h_n));
      if (r.c_n.defined()) loss = loss.add(sum(r.c_n));
      loss.backward();
      for (const Tensor& in : t) grads[dt == DType::Float32].push_back(values(in.grad()));
    }
    for (size_t i = 0; i < grads[0].size(); ++i) {
      double scale = 0;
      for (double v : grads[0][i]) scale = std::max(scale, std::abs(v));
      for (size_t k = 0; k < grads[0][i].size(); ++k)
        EXPECT_NEAR(grads[1][i][k], grads[0][i][k], 2e-5 * (1 + scale)) << "operand " << i << " element " << k;
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

// ------------------------------------------------------------------ 2-layer bidirectional stack

// What nn::LSTM/GRU do for num_layers = 2, bidirectional: each layer runs rnn_layer forward and
// reversed on the same input with the same lengths, and the next layer reads both outputs joined
// along the feature dim. Operands: x, then per (layer, direction) w_ih, w_hh, b_ih, b_hh, h0, c0.
Tensor stack_forward(RnnMode mode, const std::vector<Tensor>& t, const std::vector<int64_t>& lengths) {
  Tensor layer_in = t[0];
  std::vector<Tensor> finals;
  for (int l = 0; l < 2; ++l) {
    std::vector<Tensor> outs;
    for (int dir = 0; dir < 2; ++dir) {
      const Tensor* p = &t[1 + (l * 2 + dir) * 6];
      RnnLayerResult r = rnn_layer(mode, layer_in, p[0], p[1], p[2], p[3], p[4], p[5], lengths, dir == 1);
      outs.push_back(r.output);
      finals.push_back(r.h_n.reshape({-1}));
      if (r.c_n.defined()) finals.push_back(r.c_n.reshape({-1}));
    }
    layer_in = cat(outs, 2);
  }
  finals.insert(finals.begin(), layer_in.reshape({-1}));
  return cat(finals, 0);
}

struct Stack {
  std::vector<Tensor> tensors;
  Vec expected;  // from the float64 reference
};

Stack make_stack(RnnMode mode, int64_t T, int64_t B, int64_t I, int64_t H, const std::vector<int64_t>& lengths,
                 uint32_t seed) {
  const bool lstm = mode == RnnMode::Lstm;
  const int64_t GH = gates_of(mode) * H;
  std::mt19937 rng(seed);
  Stack s;
  Vec x = random_vec(rng, T * B * I, 1.0);
  s.tensors.push_back(make(x, {T, B, I}, DType::Float64, true));
  Vec layer_in = x;
  int64_t in_size = I;
  std::vector<Vec> finals;
  for (int l = 0; l < 2; ++l) {
    Vec dir_out[2];
    for (int dir = 0; dir < 2; ++dir) {
      Params p{random_vec(rng, GH * in_size, 0.6), random_vec(rng, GH * H, 0.6), random_vec(rng, GH, 0.6),
               random_vec(rng, GH, 0.6)};
      Vec h0 = random_vec(rng, B * H, 1.0), c0 = lstm ? random_vec(rng, B * H, 1.0) : Vec();
      for (auto [v, shape] : {std::pair<const Vec*, Shape>{&p.w_ih, {GH, in_size}},
                              {&p.w_hh, {GH, H}},
                              {&p.b_ih, {GH}},
                              {&p.b_hh, {GH}},
                              {&h0, {B, H}},
                              {&c0, {B, H}}})
        s.tensors.push_back(v->empty() ? Tensor() : make(*v, shape, DType::Float64, true));
      RefOut r = ref_layer(mode, layer_in, T, B, in_size, H, p, h0, c0, lengths, dir == 1);
      dir_out[dir] = r.out;
      finals.push_back(r.h_n);
      if (lstm) finals.push_back(r.c_n);
    }
    Vec joined;
    for (int64_t tb = 0; tb < T * B; ++tb)
      for (int dir = 0; dir < 2; ++dir)
        joined.insert(joined.end(), dir_out[dir].begin() + tb * H, dir_out[dir].begin() + (tb + 1) * H);
    layer_in = joined;
    in_size = 2 * H;
  }
  s.expected = layer_in;
  for (const Vec& f : finals) s.expected.insert(s.expected.end(), f.begin(), f.end());
  return s;
}

TEST(RnnLayerStack, TwoLayerBidirectionalMatchesReferenceAndGradchecks) {
  const std::vector<int64_t> lengths{4, 2, 3};
  for (RnnMode mode : {RnnMode::Lstm, RnnMode::Gru, RnnMode::RnnTanh}) {
    SCOPED_TRACE(name_of(mode));
    Stack s = make_stack(mode, 4, 3, 3, 2, lengths, 41);
    expect_near_vec(values(stack_forward(mode, s.tensors, lengths)), s.expected, 1e-12, "stack output");
    auto fn = [mode, &lengths](const std::vector<Tensor>& t) { return stack_forward(mode, t, lengths); };
    GradcheckResult r = gradcheck(fn, s.tensors);
    EXPECT_TRUE(r.ok) << r.message;
  }
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
  expect_error(call(with(0, zeros({3, 2, 4}, {DType::Int32}))), "float32 or float64");
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

}  // namespace
}  // namespace ember
