// BatchNorm1d/2d and LayerNorm through the module API: batch statistics and the running-statistic
// update in training (momentum, cumulative average, num_batches_tracked), running statistics in
// eval, track_running_stats = false, affine = false, PyTorch's state_dict names, gradchecks in
// training mode, errors.
#include <cmath>

#include "test_util.h"

using namespace ember;
using namespace layers_test;

TEST(BatchNormLayer, TrainUpdatesRunningStatsEvalUsesThem) {
  nn::BatchNorm1d bn(2);
  Tensor x = tensor({{1, 2}, {3, 6}});
  const double eps = 1e-5;
  // Batch mean [2, 4], biased variance [1, 4].
  expect_near(vec(bn(x)),
              {-1 / std::sqrt(1 + eps), -2 / std::sqrt(4 + eps), 1 / std::sqrt(1 + eps), 2 / std::sqrt(4 + eps)}, 1e-6);
  // Running statistics: momentum 0.1 towards the mean and the unbiased variance [2, 8].
  expect_near(vec(bn.running_mean), {0.2, 0.4}, 1e-7);
  expect_near(vec(bn.running_var), {0.9 + 0.2, 0.9 + 0.8}, 1e-6);
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), DType::Int64);
  bn.eval();
  Tensor y = bn(x);
  expect_near(vec(y),
              {(1 - 0.2) / std::sqrt(1.1 + eps), (2 - 0.4) / std::sqrt(1.7 + eps), (3 - 0.2) / std::sqrt(1.1 + eps),
               (6 - 0.4) / std::sqrt(1.7 + eps)},
              1e-6);
  // Eval leaves the statistics alone.
  EXPECT_EQ(bn.num_batches_tracked.item(), 1.0);
  expect_near(vec(bn.running_mean), {0.2, 0.4}, 1e-7);
  EXPECT_EQ(names(bn.state_dict()),
            (std::vector<std::string>{"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}));
}

TEST(BatchNormLayer, CumulativeAverageWithoutMomentum) {
  nn::BatchNorm1d bn(1, {.momentum = std::nullopt});
  bn(tensor({1.0, 3.0}).view({2, 1}));  // mean 2
  bn(tensor({5.0, 7.0}).view({2, 1}));  // mean 6
  expect_near(vec(bn.running_mean), {4.0}, 1e-6);
  expect_near(vec(bn.running_var), {2.0}, 1e-6);  // unbiased variances 2 and 2
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
  bn.reset_running_stats();
  EXPECT_EQ(bn.num_batches_tracked.item(), 0.0);
  EXPECT_EQ(vec(bn.running_var), std::vector<double>{1.0});
}

TEST(BatchNormLayer, NoRunningStatsAndNoAffine) {
  nn::BatchNorm2d bn(2, {.affine = false, .track_running_stats = false});
  EXPECT_TRUE(bn.parameters().empty());
  EXPECT_TRUE(bn.state_dict().empty());
  Tensor x = rand64({3, 2, 2, 2}, 1, false).to(DType::Float32);
  bn.eval();  // still batch statistics
  Tensor y = bn(x);
  std::vector<double> v = vec(y);
  double m0 = 0;
  for (int n = 0; n < 3; ++n)
    for (int k = 0; k < 4; ++k) m0 += v[static_cast<size_t>(n * 8 + k)];
  EXPECT_NEAR(m0 / 12, 0.0, 1e-6);
}

TEST(BatchNormLayer, Gradcheck) {
  nn::BatchNorm2d bn2(2);
  {
    NoGradGuard ng;
    bn2.weight.copy_(tensor({0.5, 2.0}));
    bn2.bias.copy_(tensor({0.1, -0.3}));
  }
  gradcheck_module(bn2, rand64({3, 2, 2, 2}, 2));
  nn::BatchNorm1d bn1(3);
  gradcheck_module(bn1, rand64({4, 3}, 3));
  nn::BatchNorm1d bn3(3, {.momentum = 0.5});
  gradcheck_module(bn3, rand64({2, 3, 4}, 4));
  bn3.eval();
  gradcheck_module(bn3, rand64({2, 3, 4}, 5));
}

TEST(BatchNormLayer, Errors) {
  nn::BatchNorm2d bn(3);
  EXPECT_TRUE(has(error_of([&] { bn(zeros({2, 3, 4})); }), "BatchNorm2d: expected a 4-D"));
  EXPECT_TRUE(has(error_of([&] { bn(zeros({2, 4, 2, 2})); }), "built for 3"));
  nn::BatchNorm1d b1(3);
  EXPECT_TRUE(has(error_of([&] { b1(zeros({2, 3, 4, 5})); }), "BatchNorm1d"));
  EXPECT_THROW(nn::BatchNorm1d(0), Error);
  EXPECT_THROW(nn::BatchNorm1d(2, {.momentum = 1.5}), Error);
}

TEST(LayerNormLayer, ValuesGradcheckNames) {
  nn::LayerNorm ln({3});
  expect_near(vec(ln(tensor({{1, 2, 3}}))), {-std::sqrt(1.5), 0, std::sqrt(1.5)}, 1e-4);
  EXPECT_EQ(names(ln.named_parameters()), (std::vector<std::string>{"weight", "bias"}));
  nn::LayerNorm ln2({3, 4});
  {
    NoGradGuard ng;
    normal_(ln2.weight);
    normal_(ln2.bias);
  }
  gradcheck_module(ln2, rand64({2, 3, 4}, 6));
  nn::LayerNorm plain({4}, {.elementwise_affine = false});
  EXPECT_TRUE(plain.parameters().empty());
  gradcheck_module(plain, rand64({3, 4}, 7));
  nn::LayerNorm nobias({4}, {.bias = false});
  EXPECT_EQ(names(nobias.named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_THROW(ln(zeros({2, 4})), Error);
}
