// dropout: kept values scaled by 1/(1-p), drop-rate statistics, determinism through the
// generator (same seed, same mask; the mask is the generator's Bernoulli(1 - p) stream), train vs
// eval, p = 0 and p = 1, the backward's mask and errors. Finite differences with a fixed mask and
// the same mask for a transposed input are op-table rows (tests/ops/op_rows_nn.cpp).
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

TEST(Dropout, KeptValuesAreScaledAndTheRestZero) {
  Tensor x = randn_t({1000}, 1, DType::Float32);
  Generator g(42);
  Tensor y = dropout(x, 0.25, true, &g);
  std::vector<double> xv = vec(x), yv = vec(y);
  int kept = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0) continue;
    ++kept;
    EXPECT_NEAR(yv[i], xv[i] / 0.75, 1e-6);
  }
  EXPECT_GT(kept, 600);
  EXPECT_LT(kept, 900);
}

TEST(Dropout, DropRateAndMeanStatistics) {
  const int64_t n = 200000;
  for (double p : {0.1, 0.5, 0.9}) {
    Generator g(7);
    Tensor y = dropout(ones({n}, {.dtype = DType::Float64}), p, true, &g);
    std::vector<double> v = vec(y);
    double zeros = 0, mean = 0;
    for (double e : v) zeros += e == 0.0, mean += e;
    zeros /= static_cast<double>(n), mean /= static_cast<double>(n);
    const double sd = std::sqrt(p * (1 - p) / static_cast<double>(n));
    EXPECT_NEAR(zeros, p, 5 * sd) << "p=" << p;
    EXPECT_NEAR(mean, 1.0, 5 * sd / (1 - p)) << "p=" << p;  // inverted dropout keeps the expectation
  }
}

TEST(Dropout, SameSeedSameMaskAndItIsTheGeneratorsBernoulliStream) {
  Tensor x = ones({3, 50});
  Generator a(123), b(123), c(124), d(123);
  Tensor ya = dropout(x, 0.3, true, &a), yb = dropout(x, 0.3, true, &b), yc = dropout(x, 0.3, true, &c);
  EXPECT_EQ(vec(ya), vec(yb));
  EXPECT_NE(vec(ya), vec(yc));
  // The generator advanced: a second draw differs from the first.
  EXPECT_NE(vec(dropout(x, 0.3, true, &a)), vec(ya));
  // The keep-mask is Bernoulli(1 - p) from the same stream (the device-independent layout).
  Tensor keep = bernoulli(x.shape(), 0.7, {.dtype = DType::UInt8}, &d);
  std::vector<double> kv = vec(keep), yv = vec(ya);
  for (size_t i = 0; i < kv.size(); ++i) EXPECT_EQ(yv[i] != 0.0, kv[i] == 1.0) << i;
  // The default generator follows manual_seed.
  manual_seed(99);
  Tensor d1 = dropout(x, 0.5, true);
  manual_seed(99);
  EXPECT_EQ(vec(dropout(x, 0.5, true)), vec(d1));
}

TEST(Dropout, EvalAndZeroProbabilityAreIdentity) {
  Tensor x = randn_t({4, 5}, 2, DType::Float32, true);
  Tensor e = dropout(x, 0.5, false);
  EXPECT_TRUE(e.is_same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  Generator g(1);
  EXPECT_NE(vec(dropout(x, 0.5, true, &g)), vec(x));
}

TEST(Dropout, ProbabilityOneGivesZerosAndZeroGradient) {
  Tensor x = randn_t({10}, 3, DType::Float64, true);
  Tensor y = dropout(x, 1.0, true);
  EXPECT_EQ(vec(y), std::vector<double>(10, 0.0));
  y.sum().backward();
  EXPECT_EQ(vec(x.grad()), std::vector<double>(10, 0.0));
  // a multiplication by the mask, as PyTorch: a dropped NaN stays NaN
  EXPECT_TRUE(std::isnan(dropout(tensor({NAN}), 1.0, true).item()));
}

TEST(Dropout, BackwardUsesTheSameMask) {
  Tensor x = randn_t({6, 7}, 4, DType::Float64, true);
  Generator g(5);
  Tensor y = dropout(x, 0.4, true, &g);
  EXPECT_EQ(y.grad_fn()->name(), "DropoutBackward");
  y.backward(full({6, 7}, 2.0, {.dtype = DType::Float64}));
  std::vector<double> yv = vec(y), gv = vec(x.grad());
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(gv[i], yv[i] != 0.0 ? 2.0 / 0.6 : 0.0, 1e-12) << i;
}

TEST(Dropout, Errors) {
  expect_error([] { dropout(ones({3}), -0.1, true); }, {"dropout", "[0, 1]", "-0.1"});
  expect_error([] { dropout(ones({3}), 1.5, true); }, {"dropout", "[0, 1]", "1.5"});
  expect_error([] { dropout(ones({3}, {.dtype = DType::Int64}), 0.5, true); }, {"dropout", "float32 or float64"});
  expect_error([] { dropout(Tensor(), 0.5, true); }, {"dropout", "undefined"});
}
