// Dropout: the training mask (rate, 1/(1-p) scaling, gradient through the same mask), eval
// identity, reproducibility through a generator, p = 0 and p = 1, errors; also Dropout inside a
// Sequential following train()/eval().
#include "test_util.h"

using namespace ember;
using namespace layers_test;

TEST(DropoutLayer, TrainMaskScalesAndEvalIsIdentity) {
  Generator g(11);
  nn::Dropout d(0.25, &g);
  Tensor x = ones({20000}, {.requires_grad = true});
  Tensor y = d(x);
  std::vector<double> v = vec(y);
  int64_t zeros_count = 0;
  for (double e : v) {
    if (e == 0)
      ++zeros_count;
    else
      EXPECT_NEAR(e, 1.0 / 0.75, 1e-6);
  }
  EXPECT_NEAR(static_cast<double>(zeros_count) / 20000, 0.25, 0.02);
  y.sum().backward();
  std::vector<double> gv = vec(x.grad());
  for (size_t i = 0; i < v.size(); i += 97) EXPECT_EQ(gv[i], v[i]);  // same mask, same scale
  d.eval();
  Tensor z = d(x);
  EXPECT_EQ(vec(z), std::vector<double>(20000, 1.0));
}

TEST(DropoutLayer, GeneratorMakesMasksReproducible) {
  Generator g1(5), g2(5);
  nn::Dropout a(0.5, &g1), b(0.5, &g2);
  Tensor x = ones({1000});
  EXPECT_EQ(vec(a(x)), vec(b(x)));
  EXPECT_NE(vec(a(x)), vec(a(x)));  // a fresh mask each call
}

TEST(DropoutLayer, EdgeProbabilitiesAndErrors) {
  Tensor x = full({100}, 3.0);
  EXPECT_EQ(vec(nn::Dropout(0.0)(x)), vec(x));
  EXPECT_EQ(vec(nn::Dropout(1.0)(x)), std::vector<double>(100, 0.0));
  EXPECT_TRUE(has(error_of([] { nn::Dropout(1.5); }), "[0, 1]"));
  EXPECT_EQ(nn::Dropout(0.3).extra_repr(), "p=0.3");
}

TEST(DropoutLayer, FollowsModeInsideSequential) {
  nn::Sequential s(nn::make<nn::Dropout>(0.5), nn::make<nn::ReLU>());
  Tensor x = ones({1000});
  s.eval();
  EXPECT_EQ(vec(s(x)), std::vector<double>(1000, 1.0));
  s.train();
  EXPECT_NE(vec(s(x)), std::vector<double>(1000, 1.0));
}
