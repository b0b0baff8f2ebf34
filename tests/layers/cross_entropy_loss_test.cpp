// CrossEntropyLoss (core's fused op through the module and nn::cross_entropy): agreement with
// nll_loss(log_softmax) including weights and ignore_index, label smoothing by hand, probability
// targets, the weight buffer, gradcheck.
#include <cmath>

#include "test_util.h"

using namespace ember;
using namespace layers_test;

TEST(CrossEntropyLoss, MatchesNllOfLogSoftmax) {
  Tensor x = rand64({4, 3}, 1, false);
  Tensor t = tensor({0, 2, 1, -100}, {.dtype = DType::Int64});
  Tensor w = tensor({1.0, 2.0, 0.5}, {.dtype = DType::Float64});
  nn::CrossEntropyLoss ce({.weight = w});
  EXPECT_NEAR(ce(x, t).item(), nn::nll_loss(log_softmax(x, 1), t, {.weight = w}).item(), 1e-12);
  nn::CrossEntropyOptions sum_opts;  // set field by field: core's options struct has no member defaults
  sum_opts.reduction = nn::Reduction::Sum;
  EXPECT_NEAR(nn::cross_entropy(x, t, sum_opts).item(),
              nn::nll_loss(log_softmax(x, 1), t, {.reduction = nn::Reduction::Sum}).item(), 1e-12);
  EXPECT_EQ(names(ce.named_buffers()), std::vector<std::string>{"weight"});
}

TEST(CrossEntropyLoss, LabelSmoothingAndProbabilities) {
  // Two classes, logits equal: log_softmax = log 0.5 everywhere, so every target costs log 2.
  Tensor x = zeros({1, 2}, {.dtype = DType::Float64});
  nn::CrossEntropyOptions smooth;
  smooth.label_smoothing = 0.2;
  EXPECT_NEAR(nn::CrossEntropyLoss(smooth)(x, tensor({1}, {.dtype = DType::Int64})).item(), std::log(2.0), 1e-12);
  Tensor z = tensor({{0.0, std::log(3.0)}}, {.dtype = DType::Float64});  // probabilities 0.25, 0.75
  // (1 - 0.2) * -log 0.75 + 0.2 * mean(-log 0.25, -log 0.75)
  EXPECT_NEAR(nn::cross_entropy(z, tensor({1}, {.dtype = DType::Int64}), smooth).item(),
              -0.8 * std::log(0.75) - 0.1 * (std::log(0.25) + std::log(0.75)), 1e-12);
  Tensor p = tensor({{0.5, 0.5}}, {.dtype = DType::Float64});
  EXPECT_NEAR(nn::cross_entropy(z, p).item(), -0.5 * (std::log(0.25) + std::log(0.75)), 1e-12);
}

TEST(CrossEntropyLoss, Gradcheck) {
  Tensor x = rand64({3, 4, 2}, 2);
  Tensor t = tensor({{0, 3}, {2, -100}, {1, 1}}, {.dtype = DType::Int64});
  nn::CrossEntropyOptions o;
  o.label_smoothing = 0.1;
  GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return nn::cross_entropy(in[0], t, o); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}
