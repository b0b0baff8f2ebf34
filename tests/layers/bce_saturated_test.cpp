// binary_cross_entropy at saturated probabilities (exactly 0 or 1, as a float32 sigmoid gives for
// large logits): the loss is clamped at 100 and the gradient stays finite, as in PyTorch.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"
#include "layers/functional.h"

using namespace ember;

TEST(BinaryCrossEntropy, GradientIsFiniteAtSaturatedProbabilities) {
  Tensor p = tensor({0.0, 1.0, 1.0, 0.0, 0.25}).requires_grad_();
  Tensor y = tensor({1.0, 1.0, 0.0, 0.0, 1.0});
  Tensor loss = nn::binary_cross_entropy(p, y, Tensor(), Reduction::Sum);
  // 100 (clamped) + 0 + 100 (clamped) + 0 + -log(0.25).
  EXPECT_NEAR(loss.item(), 200.0 - std::log(0.25), 1e-4);
  loss.backward();
  std::vector<float> g = p.grad().to_vector<float>();
  for (float v : g) EXPECT_TRUE(std::isfinite(v)) << v;
  // (p - y) / max(p (1 - p), 1e-12): -1e12, 0, 1e12, 0, -0.75 / 0.1875 = -4.
  EXPECT_FLOAT_EQ(g[0], -1e12f);
  EXPECT_EQ(g[1], 0.0f);
  EXPECT_FLOAT_EQ(g[2], 1e12f);
  EXPECT_EQ(g[3], 0.0f);
  EXPECT_FLOAT_EQ(g[4], -4.0f);
}

TEST(BinaryCrossEntropy, SaturatedSigmoidTrainsWithoutNaN) {
  // A logit of 40 makes sigmoid exactly 1 in float32; labelled 0 the loss is the clamp value and
  // the gradient reaching the logit is finite (sigmoid' is 0 there, so it is 0, not NaN).
  Tensor x = tensor({40.0, -40.0}).requires_grad_();
  Tensor loss = nn::binary_cross_entropy(sigmoid(x), tensor({0.0, 1.0}));
  loss.backward();
  for (float v : x.grad().to_vector<float>()) EXPECT_TRUE(std::isfinite(v)) << v;
  EXPECT_NEAR(loss.item(), (100.0 + 40.0) / 2, 1e-3);  // -log(sigmoid(-40)) = 40 is not clamped
}
