// cross_entropy: values against log_softmax + gather computed by hand in float64 for every option
// (class weights, ignore_index, label smoothing, each reduction, K-dim inputs, probability
// targets, unbatched), gradients (softmax - target), gradchecks, stability and errors.
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

namespace {

// log_softmax over dim 1 of [N, C, S] values, by hand.
std::vector<double> log_softmax_ref(const std::vector<double>& x, int64_t N, int64_t C, int64_t S) {
  std::vector<double> r(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      double m = -INFINITY, z = 0;
      for (int64_t c = 0; c < C; ++c) m = std::max(m, x[static_cast<size_t>((n * C + c) * S + s)]);
      for (int64_t c = 0; c < C; ++c) z += std::exp(x[static_cast<size_t>((n * C + c) * S + s)] - m);
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = static_cast<size_t>((n * C + c) * S + s);
        r[i] = x[i] - m - std::log(z);
      }
    }
  return r;
}

// PyTorch's definition, written out: per-sample losses and the mean's denominator.
struct CeRef {
  std::vector<double> per;
  double denom = 0;
};

CeRef ce_ref(const Tensor& logits, const std::vector<int64_t>& t, const std::vector<double>& w, int64_t ignore,
             double ls) {
  const int64_t N = logits.size(0), C = logits.size(1), S = logits.numel() / (N * C);
  std::vector<double> lp = log_softmax_ref(vec(logits), N, C, S);
  CeRef r;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t ti = t[static_cast<size_t>(n * S + s)];
      if (ti == ignore) {
        r.per.push_back(0.0);
        continue;
      }
      auto W = [&](int64_t c) { return w.empty() ? 1.0 : w[static_cast<size_t>(c)]; };
      const double nll = -W(ti) * lp[static_cast<size_t>((n * C + ti) * S + s)];
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth -= W(c) * lp[static_cast<size_t>((n * C + c) * S + s)];
      r.per.push_back((1 - ls) * nll + ls / static_cast<double>(C) * smooth);
      r.denom += W(ti);
    }
  return r;
}

double total(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}

Tensor labels(const std::vector<int64_t>& v, Shape s) {
  return from_vector(v, std::move(s));
}

}  // namespace

TEST(CrossEntropy, HandComputed) {
  Tensor x = tensor({{1, 2, 3}}, {.dtype = DType::Float64});
  Tensor y = cross_entropy(x, labels({2}, {1}));
  EXPECT_NEAR(y.item(), std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-14);
  EXPECT_EQ(y.dim(), 0);
  // Unbatched: [C] logits and a 0-dim target.
  EXPECT_NEAR(cross_entropy(tensor({1, 2, 3}, {.dtype = DType::Float64}), labels({0}, {})).item(),
              2 + std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-14);
  // Huge logits stay finite: log_softmax is computed relative to the max.
  EXPECT_NEAR(cross_entropy(tensor({{1000, 0}}), labels({1}, {1})).item(), 1000.0, 1e-3);
}

TEST(CrossEntropy, EveryOptionAgainstLogSoftmaxGather) {
  const int64_t N = 7, C = 5;
  Tensor x = randn_t({N, C}, 1, DType::Float64);
  std::vector<int64_t> t{0, 4, 2, -100, 1, 3, 3};
  std::vector<double> w{0.5, 1.0, 2.0, 0.25, 3.0};
  Tensor wt = from_vector(w, {C});
  for (bool weighted : {false, true})
    for (double ls : {0.0, 0.3})
      for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
        SCOPED_TRACE(std::string(weighted ? "weighted " : "") + "ls=" + std::to_string(ls) +
                     " red=" + std::to_string(static_cast<int>(red)));
        CrossEntropyOptions o;
        o.weight = weighted ? wt : Tensor();
        o.label_smoothing = ls;
        o.reduction = red;
        CeRef r = ce_ref(x, t, weighted ? w : std::vector<double>{}, -100, ls);
        Tensor y = cross_entropy(x, labels(t, {N}), o);
        if (red == Reduction::None) {
          EXPECT_EQ(y.shape(), (Shape{N}));
          EXPECT_TRUE(all_close(y, r.per, 1e-13, 1e-13));
        } else {
          EXPECT_EQ(y.dim(), 0);
          const double want = red == Reduction::Sum ? total(r.per) : total(r.per) / r.denom;
          EXPECT_NEAR(y.item(), want, 1e-12);
        }
      }
  // A custom ignore_index
  CrossEntropyOptions o;
  o.ignore_index = 3;
  std::vector<int64_t> t3{0, 4, 2, 3, 1, 3, 3};
  CeRef r = ce_ref(x, t3, {}, 3, 0.0);
  EXPECT_NEAR(cross_entropy(x, labels(t3, {N}), o).item(), total(r.per) / 4.0, 1e-13);
}

TEST(CrossEntropy, KDimInputs) {
  const int64_t N = 2, C = 4, D1 = 3, D2 = 2;
  Tensor x = randn_t({N, C, D1, D2}, 2, DType::Float64);
  std::vector<int64_t> t{0, 1, 2, 3, -100, 0, 3, 3, 2, 1, 0, 2};
  std::vector<double> w{1, 2, 3, 4};
  CrossEntropyOptions o;
  o.weight = from_vector(w, {C});
  o.label_smoothing = 0.1;
  o.reduction = Reduction::None;
  CeRef r = ce_ref(x, t, w, -100, 0.1);
  Tensor y = cross_entropy(x, labels(t, {N, D1, D2}), o);
  EXPECT_EQ(y.shape(), (Shape{N, D1, D2}));
  EXPECT_TRUE(all_close(y, r.per, 1e-13, 1e-13));
  o.reduction = Reduction::Mean;
  EXPECT_NEAR(cross_entropy(x, labels(t, {N, D1, D2}), o).item(), total(r.per) / r.denom, 1e-13);
}

TEST(CrossEntropy, ProbabilityTargets) {
  const int64_t N = 3, C = 4;
  Tensor x = randn_t({N, C}, 3, DType::Float64);
  Tensor p = randn_t({N, C}, 4, DType::Float64);
  p = div(mul(p, p), sum(mul(p, p), {1}, true));  // rows sum to 1
  std::vector<double> w{0.5, 1, 2, 1.5};
  std::vector<double> lp = log_softmax_ref(vec(x), N, C, 1), pv = vec(p);
  for (bool weighted : {false, true})
    for (double ls : {0.0, 0.2}) {
      std::vector<double> per;
      for (int64_t n = 0; n < N; ++n) {
        double l = 0;
        for (int64_t c = 0; c < C; ++c) {
          const double tc = pv[static_cast<size_t>(n * C + c)] * (1 - ls) + ls / C;
          l -= (weighted ? w[static_cast<size_t>(c)] : 1.0) * tc * lp[static_cast<size_t>(n * C + c)];
        }
        per.push_back(l);
      }
      CrossEntropyOptions o;
      o.weight = weighted ? from_vector(w, {C}) : Tensor();
      o.label_smoothing = ls;
      o.reduction = Reduction::None;
      EXPECT_TRUE(all_close(cross_entropy(x, p, o), per, 1e-13, 1e-13));
      o.reduction = Reduction::Mean;  // divides by the number of samples, weights or not
      EXPECT_NEAR(cross_entropy(x, p, o).item(), total(per) / N, 1e-13);
      o.reduction = Reduction::Sum;
      EXPECT_NEAR(cross_entropy(x, p, o).item(), total(per), 1e-13);
    }
}

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHot) {
  const int64_t N = 4, C = 3;
  Tensor x = randn_t({N, C}, 5, DType::Float64, true);
  std::vector<int64_t> t{2, 0, -100, 1};
  cross_entropy(x, labels(t, {N})).backward();
  std::vector<double> lp = log_softmax_ref(vec(x.detach()), N, C, 1), want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      want.push_back(t[n] == -100 ? 0.0 : (std::exp(lp[static_cast<size_t>(n * C + c)]) - (c == t[n])) / 3.0);
  EXPECT_TRUE(all_close(x.grad(), want, 1e-14, 1e-12));
  EXPECT_EQ(cross_entropy(x, labels(t, {N})).grad_fn()->name(), "CrossEntropyBackward");
}

TEST(CrossEntropy, Gradcheck) {
  Tensor x = randn_t({5, 4}, 6, DType::Float64, true);
  Tensor t = labels({0, 3, -100, 1, 3}, {5});
  Tensor w = tensor({0.5, 1, 2, 1.5}, {.dtype = DType::Float64});
  for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean})
    for (double ls : {0.0, 0.25}) {
      CrossEntropyOptions o;
      o.weight = w, o.reduction = red, o.label_smoothing = ls;
      EXPECT_TRUE(grad_ok([t, o](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, o); }, {x}));
    }
  Tensor xk = randn_t({2, 3, 2, 2}, 7, DType::Float64, true);
  Tensor tk = labels({0, 1, 2, 2, 1, 0, -100, 2}, {2, 2, 2});
  EXPECT_TRUE(grad_ok([tk](const std::vector<Tensor>& in) { return cross_entropy(in[0], tk); }, {xk}));
  // probability targets: gradients w.r.t. logits and targets, with smoothing and weights
  Tensor xp = randn_t({3, 4}, 8, DType::Float64, true);
  Tensor tp = randn_t({3, 4}, 9, DType::Float64, true);
  CrossEntropyOptions o;
  o.weight = w, o.label_smoothing = 0.1;
  EXPECT_TRUE(grad_ok([o](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], o); }, {xp, tp}));
  Tensor xkp = randn_t({2, 3, 2}, 10, DType::Float64, true), tkp = randn_t({2, 3, 2}, 11, DType::Float64, true);
  EXPECT_TRUE(grad_ok([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1]); }, {xkp, tkp}));
}

TEST(CrossEntropy, Float32MatchesFloat64AndNonContiguousLogits) {
  Tensor x = randn_t({16, 10}, 12, DType::Float64);
  Tensor t = labels({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, {16});
  EXPECT_NEAR(cross_entropy(x.to(DType::Float32), t).item(), cross_entropy(x, t).item(), 1e-5);
  Tensor xt = randn_t({10, 16}, 13, DType::Float64).t();
  EXPECT_NEAR(cross_entropy(xt, t).item(), cross_entropy(xt.contiguous(), t).item(), 1e-14);
}

TEST(CrossEntropy, AllIgnoredMeanIsNaNAndEmptyBatch) {
  Tensor x = randn_t({2, 3}, 14, DType::Float64);
  EXPECT_TRUE(std::isnan(cross_entropy(x, labels({-100, -100}, {2})).item()));
  CrossEntropyOptions o;
  o.reduction = Reduction::Sum;
  EXPECT_EQ(cross_entropy(x, labels({-100, -100}, {2}), o).item(), 0.0);
  o.reduction = Reduction::None;
  EXPECT_EQ(cross_entropy(zeros({0, 3}), labels({}, {0}), o).shape(), (Shape{0}));
}

TEST(CrossEntropy, Errors) {
  Tensor x = zeros({2, 10});
  expect_error(
      [&] {
        cross_entropy(x, labels({3, 12}, {2}));
      },
      {"cross_entropy: target 12 is out of range for 10 classes"});
  expect_error([&] { cross_entropy(x, labels({-1, 0}, {2})); }, {"cross_entropy", "target -1", "10 classes"});
  expect_error([&] { cross_entropy(x, labels({1, 2, 3}, {3})); }, {"cross_entropy", "target shape [3]", "[2, 10]"});
  expect_error(
      [&] {
        cross_entropy(x, from_vector(std::vector<int32_t>{1, 2}, {2}));
      },
      {"cross_entropy", "int64", "int32"});
  expect_error([&] { cross_entropy(x, zeros({2, 9})); }, {"cross_entropy", "probability targets", "[2, 10]"});
  expect_error(
      [&] {
        cross_entropy(x, zeros({2, 10}, {.dtype = DType::Float64}));
      },
      {"cross_entropy", "target dtype float64"});
  CrossEntropyOptions o;
  o.ignore_index = 0;
  expect_error([&] { cross_entropy(x, zeros({2, 10}), o); }, {"cross_entropy", "ignore_index"});
  o = {};
  o.weight = ones({9});
  expect_error([&] { cross_entropy(x, labels({1, 2}, {2}), o); }, {"cross_entropy", "weight must have shape [10]"});
  o = {};
  o.label_smoothing = 1.5;
  expect_error([&] { cross_entropy(x, labels({1, 2}, {2}), o); }, {"cross_entropy", "label_smoothing"});
  expect_error([&] { cross_entropy(labels({1, 2}, {2}), labels({1}, {})); }, {"cross_entropy", "float32 or float64"});
  expect_error([&] { cross_entropy(scalar_tensor(1.0), labels({1}, {})); }, {"cross_entropy", "class dim"});
}
