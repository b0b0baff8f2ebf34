// Losses (functional and module forms) other than the fused cross-entropy: hand-derived values
// for each reduction, nll_loss weights and ignore_index, the numerical stability of
// binary_cross_entropy_with_logits and its exact gradient at 0, kl_div's reductions and 0 log 0,
// gradchecks in float64, and errors.
#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/gradcheck.h"
#include "layers/nn.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;
using nn::Reduction;

namespace {
Tensor f64(std::initializer_list<double> v, bool rg = false) {
  return tensor(v, {.dtype = DType::Float64, .requires_grad = rg});
}
Tensor rand64(Shape s, uint64_t seed, bool rg = true) {
  Generator g(seed);
  return randn(std::move(s), {.dtype = DType::Float64, .requires_grad = rg}, &g);
}
void expect_gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& in) {
  GradcheckResult r = gradcheck(fn, in);
  EXPECT_TRUE(r.ok) << r.message;
}
}  // namespace

TEST(MseL1SmoothL1, HandValuesAllReductions) {
  Tensor x = f64({1, 2, 3}), y = f64({1, 0, 5});
  EXPECT_DOUBLE_EQ(nn::mse_loss(x, y).item(), 8.0 / 3);
  EXPECT_DOUBLE_EQ(nn::mse_loss(x, y, Reduction::Sum).item(), 8.0);
  EXPECT_EQ(vec(nn::mse_loss(x, y, Reduction::None)), (std::vector<double>{0, 4, 4}));
  EXPECT_DOUBLE_EQ(nn::l1_loss(x, y).item(), 4.0 / 3);
  EXPECT_DOUBLE_EQ(nn::L1Loss(Reduction::Sum)(x, y).item(), 4.0);
  // smooth L1, beta 1: |d| = 0, 2, 0.5 -> 0, 1.5, 0.125.
  Tensor y2 = f64({1, 0, 3.5});
  EXPECT_EQ(vec(nn::smooth_l1_loss(x, y2, Reduction::None)), (std::vector<double>{0, 1.5, 0.125}));
  EXPECT_DOUBLE_EQ(nn::SmoothL1Loss(Reduction::Mean, 4.0)(x, y2).item(), (0 + 0.5 * 4 / 4 + 0.5 * 0.25 / 4) / 3);
  EXPECT_DOUBLE_EQ(nn::smooth_l1_loss(x, y2, Reduction::Sum, 0.0).item(), 2.5);  // beta 0 = L1
  EXPECT_DOUBLE_EQ(nn::MSELoss()(x, y).item(), 8.0 / 3);
}

TEST(MseL1SmoothL1, Gradcheck) {
  Tensor x = rand64({3, 4}, 1), y = rand64({3, 4}, 2);
  expect_gradcheck([](const std::vector<Tensor>& in) { return nn::mse_loss(in[0], in[1]); }, {x, y});
  expect_gradcheck([](const std::vector<Tensor>& in) { return nn::l1_loss(in[0], in[1], Reduction::Sum); }, {x, y});
  expect_gradcheck([](const std::vector<Tensor>& in) { return nn::smooth_l1_loss(in[0], in[1], Reduction::None, 0.7); },
                   {x, y});
}

TEST(NllLoss, WeightsIgnoreIndexAndHighDims) {
  Tensor lp = log(tensor({{0.2, 0.8}, {0.5, 0.5}}, {.dtype = DType::Float64}));
  Tensor t = tensor({1, 0}, {.dtype = DType::Int64});
  EXPECT_NEAR(nn::nll_loss(lp, t).item(), -(std::log(0.8) + std::log(0.5)) / 2, 1e-15);
  EXPECT_NEAR(nn::nll_loss(lp, t, {.reduction = Reduction::Sum}).item(), -(std::log(0.8) + std::log(0.5)), 1e-15);
  Tensor w = f64({1, 3});
  EXPECT_NEAR(nn::nll_loss(lp, t, {.weight = w}).item(), (-3 * std::log(0.8) - std::log(0.5)) / 4, 1e-15);
  EXPECT_NEAR(vec(nn::nll_loss(lp, t, {.weight = w, .reduction = Reduction::None}))[0], -3 * std::log(0.8), 1e-15);
  Tensor ti = tensor({1, -100}, {.dtype = DType::Int64});
  EXPECT_NEAR(nn::nll_loss(lp, ti).item(), -std::log(0.8), 1e-15);
  EXPECT_NEAR(nn::NLLLoss({.ignore_index = 1})(lp, t).item(), -std::log(0.5), 1e-15);
  // [N, C, d]: class dim 1.
  Tensor lp3 = lp.unsqueeze(2).expand({2, 2, 3}).contiguous();
  Tensor t3 = tensor({{1, 1, 0}, {0, 0, 0}}, {.dtype = DType::Int64});
  EXPECT_NEAR(nn::nll_loss(lp3, t3, {.reduction = Reduction::Sum}).item(),
              -(2 * std::log(0.8) + std::log(0.2) + 3 * std::log(0.5)), 1e-14);
  // Gradient lands on the picked entries only, scaled by the weights.
  Tensor p = lp.detach().requires_grad_();
  nn::nll_loss(p, t, {.weight = w}).backward();
  EXPECT_EQ(vec(p.grad()), (std::vector<double>{0, -0.75, -0.25, 0}));
}

TEST(NllLoss, GradcheckAndErrors) {
  Tensor x = rand64({4, 3, 2}, 3);
  Tensor t = tensor({{0, 2}, {1, 1}, {2, -100}, {0, 1}}, {.dtype = DType::Int64});
  Tensor w = f64({0.5, 2.0, 1.0}, true);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return nn::nll_loss(in[0], t, {.weight = in[1]}); }, {x, w});
  Tensor lp = rand64({2, 3}, 4, false);
  EXPECT_TRUE(has(error_of([&] {
                    nn::nll_loss(lp, tensor({0, 3}, {.dtype = DType::Int64}));
                  }),
                  "target class 3 is out of range for 3 classes"));
  EXPECT_TRUE(has(error_of([&] { nn::nll_loss(lp, tensor({0, 1})); }), "int64"));
  EXPECT_TRUE(has(error_of([&] { nn::nll_loss(lp, tensor({0, 1, 1}, {.dtype = DType::Int64})); }), "target shape"));
  EXPECT_TRUE(has(error_of([&] {
                    nn::nll_loss(lp, tensor({0, 1}, {.dtype = DType::Int64}), {.weight = f64({1})});
                  }),
                  "weight must be [3]"));
}

TEST(BinaryCrossEntropy, HandValuesClampAndErrors) {
  Tensor p = f64({0.5, 0.9}), y = f64({1, 0});
  EXPECT_NEAR(nn::binary_cross_entropy(p, y).item(), (std::log(2.0) - std::log(0.1)) / 2, 1e-15);
  EXPECT_NEAR(nn::BCELoss(f64({2, 1}), Reduction::Sum)(p, y).item(), 2 * std::log(2.0) - std::log(0.1), 1e-14);
  // log(0) is clamped at -100, as PyTorch.
  EXPECT_DOUBLE_EQ(nn::binary_cross_entropy(f64({0.0}), f64({1.0})).item(), 100.0);
  EXPECT_TRUE(has(error_of([&] { nn::binary_cross_entropy(f64({1.5}), f64({1})); }), "[0, 1]"));
  EXPECT_TRUE(has(error_of([&] { nn::binary_cross_entropy(f64({0.5, 0.5}), f64({1})); }), "must be equal"));
  Tensor q = sigmoid(rand64({3, 2}, 5, false)).requires_grad_();
  Tensor t = rand(Shape{3, 2}, {.dtype = DType::Float64});
  expect_gradcheck([&](const std::vector<Tensor>& in) { return nn::binary_cross_entropy(in[0], in[1]); },
                   {q, t.requires_grad_()});
}

TEST(BceWithLogits, StableForLargeLogitsAndExactGradientAtZero) {
  Tensor x = f64({0, 100, -100, 1000, -1000}, true), y = f64({1, 1, 0, 0, 1});
  std::vector<double> l = vec(nn::binary_cross_entropy_with_logits(x, y, {.reduction = Reduction::None}));
  EXPECT_NEAR(l[0], std::log(2.0), 1e-15);
  EXPECT_NEAR(l[1], 0.0, 1e-40);
  EXPECT_NEAR(l[2], 0.0, 1e-40);
  EXPECT_DOUBLE_EQ(l[3], 1000.0);
  EXPECT_DOUBLE_EQ(l[4], 1000.0);
  nn::binary_cross_entropy_with_logits(x, y, {.reduction = Reduction::Sum}).backward();
  std::vector<double> g = vec(x.grad());
  EXPECT_DOUBLE_EQ(g[0], -0.5);  // sigmoid(0) - 1, not -1 as a naive max(x, 0) gradient gives
  EXPECT_NEAR(g[1], 0.0, 1e-40);
  EXPECT_DOUBLE_EQ(g[3], 1.0);
  EXPECT_DOUBLE_EQ(g[4], -1.0);
  for (double v : g) EXPECT_TRUE(std::isfinite(v));
}

TEST(BceWithLogits, PosWeightWeightAndGradcheck) {
  // x = 0, y = 1, pw = 3: (1 + 2) log 2.
  EXPECT_NEAR(nn::binary_cross_entropy_with_logits(f64({0}), f64({1}), {.pos_weight = f64({3})}).item(),
              3 * std::log(2.0), 1e-15);
  Tensor x = rand64({4, 3}, 6), pw = f64({0.5, 2.0, 3.0}, true), w = f64({1.0, 0.5, 2.0}, true);
  Tensor y = rand(Shape{4, 3}, {.dtype = DType::Float64}).requires_grad_();
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return nn::binary_cross_entropy_with_logits(in[0], in[1], {.weight = in[3], .pos_weight = in[2]});
      },
      {x, y, pw, w});
  expect_gradcheck([](const std::vector<Tensor>& in) { return nn::binary_cross_entropy_with_logits(in[0], in[1]); },
                   {x, y});
  // Same value as the sigmoid + BCE composition.
  Tensor xs = rand64({5}, 8, false), ys = rand(Shape{5}, {.dtype = DType::Float64});
  EXPECT_NEAR(nn::BCEWithLogitsLoss()(xs, ys).item(), nn::binary_cross_entropy(sigmoid(xs), ys).item(), 1e-12);
  EXPECT_THROW(nn::binary_cross_entropy_with_logits(xs, ys, {.pos_weight = f64({1, 2})}), Error);
}

TEST(KlDiv, ReductionsZeroTargetAndLogTarget) {
  Tensor in = log(tensor({{0.5, 0.5}}, {.dtype = DType::Float64}));
  Tensor p = tensor({{1.0, 0.0}}, {.dtype = DType::Float64});
  EXPECT_NEAR(nn::kl_div(in, p, nn::KlReduction::Sum).item(), std::log(2.0), 1e-15);
  EXPECT_NEAR(nn::kl_div(in, p).item(), std::log(2.0) / 2, 1e-15);
  EXPECT_NEAR(nn::kl_div(in, p, nn::KlReduction::BatchMean).item(), std::log(2.0), 1e-15);
  EXPECT_EQ(vec(nn::kl_div(in, p, nn::KlReduction::None))[1], 0.0);
  Tensor q = log(tensor({{0.25, 0.75}}, {.dtype = DType::Float64}));
  EXPECT_NEAR(nn::KLDivLoss(nn::KlReduction::Sum, true)(in, q).item(),
              0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5), 1e-15);
  // 0 log 0 contributes a zero (not NaN) gradient for a target that requires grad.
  Tensor pt = p.clone().requires_grad_();
  Tensor inr = in.clone().requires_grad_();
  nn::kl_div(inr, pt, nn::KlReduction::Sum).backward();
  for (double v : vec(pt.grad())) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(vec(inr.grad()), (std::vector<double>{-1.0, 0.0}));
}

TEST(KlDiv, Gradcheck) {
  Tensor x = log_softmax(rand64({3, 4}, 9, false), 1).requires_grad_();
  Tensor t = softmax(rand64({3, 4}, 10, false), 1).requires_grad_();
  expect_gradcheck([](const std::vector<Tensor>& in) { return nn::kl_div(in[0], in[1], nn::KlReduction::BatchMean); },
                   {x, t});
  Tensor lt = log(t.detach()).requires_grad_();
  expect_gradcheck([](const std::vector<Tensor>& in) { return nn::kl_div(in[0], in[1], nn::KlReduction::Mean, true); },
                   {x, lt});
}

TEST(LossModules, WeightsAreBuffers) {
  nn::BCEWithLogitsLoss l({.weight = ones({3}), .pos_weight = full({3}, 2.0)});
  ASSERT_EQ(l.named_buffers().size(), 2u);
  EXPECT_EQ(l.named_buffers()[1].first, "pos_weight");
  l.to(DType::Float64);
  EXPECT_EQ(l.options.pos_weight.dtype(), DType::Float64);
  nn::NLLLoss n;
  EXPECT_TRUE(n.state_dict().empty());  // no weight: nothing to save
}
