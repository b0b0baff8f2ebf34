// nn::init: gains, fans, the bounds and spreads of kaiming/xavier, orthogonality, determinism
// through an explicit generator, and errors.
#include "layers/init.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/ops.h"

using namespace ember;
using namespace ember::nn;

namespace {
double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}
double stddev(const Tensor& t) {
  std::vector<double> v = t.to_vector<double>();
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double mean = s / static_cast<double>(v.size());
  for (double x : v) s2 += (x - mean) * (x - mean);
  return std::sqrt(s2 / static_cast<double>(v.size()));
}
}  // namespace

TEST(Init, GainsAndFans) {
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Relu), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Sigmoid), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyRelu), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::LeakyRelu, std::sqrt(5.0)), std::sqrt(2.0 / 6.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain(init::Nonlinearity::Selu), 0.75);
  init::Fans f = init::calculate_fan_in_and_fan_out(zeros({32, 16, 3, 5}));
  EXPECT_EQ(f.fan_in, 16 * 15);
  EXPECT_EQ(f.fan_out, 32 * 15);
  EXPECT_THROW(init::calculate_fan_in_and_fan_out(zeros({4})), Error);
}

TEST(Init, KaimingUniformBoundAndSpread) {
  Tensor w = empty({256, 400});
  init::kaiming_uniform_(w, std::sqrt(5.0));
  // PyTorch's Linear default: bound = sqrt(6 / ((1 + 5) * fan_in)) = 1 / sqrt(fan_in).
  const double bound = 1.0 / std::sqrt(400.0);
  EXPECT_LE(max_abs(w), bound);
  EXPECT_GT(max_abs(w), 0.99 * bound);
  EXPECT_NEAR(stddev(w), bound / std::sqrt(3.0), 0.02 * bound);
  Tensor r = empty({400, 300});
  init::kaiming_uniform_(r, 0.0, init::FanMode::FanOut, init::Nonlinearity::Relu);
  EXPECT_LE(max_abs(r), std::sqrt(6.0 / 400.0));
}

TEST(Init, KaimingNormalXavier) {
  Tensor w = empty({500, 200}, {.dtype = DType::Float64});
  init::kaiming_normal_(w, 0.0, init::FanMode::FanIn, init::Nonlinearity::Relu);
  EXPECT_NEAR(stddev(w), std::sqrt(2.0 / 200.0), 0.02 * std::sqrt(2.0 / 200.0));
  Tensor x = empty({300, 200});
  init::xavier_uniform_(x, 2.0);
  const double a = 2.0 * std::sqrt(6.0 / 500.0);
  EXPECT_LE(max_abs(x), a);
  EXPECT_GT(max_abs(x), 0.99 * a);
  Tensor n = empty({300, 200});
  init::xavier_normal_(n);
  EXPECT_NEAR(stddev(n), std::sqrt(2.0 / 500.0), 0.02 * std::sqrt(2.0 / 500.0));
}

TEST(Init, OrthogonalTallWideAndConv) {
  for (Shape s : {Shape{6, 4}, Shape{4, 6}, Shape{5, 5}, Shape{3, 2, 2, 2}}) {
    Tensor w = empty(s, {.dtype = DType::Float64});
    init::orthogonal_(w, 1.5);
    const int64_t rows = s[0], cols = w.numel() / rows;
    std::vector<double> v = w.to_vector<double>();
    // The smaller side is orthonormal (times gain): W W^T or W^T W = gain^2 I.
    const bool wide = rows < cols;
    const int64_t k = wide ? rows : cols, len = wide ? cols : rows;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        double d = 0;
        for (int64_t l = 0; l < len; ++l) {
          const double a = wide ? v[i * cols + l] : v[l * cols + i];
          const double b = wide ? v[j * cols + l] : v[l * cols + j];
          d += a * b;
        }
        EXPECT_NEAR(d, i == j ? 2.25 : 0.0, 1e-12) << shape_str(s) << " " << i << "," << j;
      }
  }
  Tensor f = empty({8, 3});
  init::orthogonal_(f);
  EXPECT_EQ(f.dtype(), DType::Float32);
  Tensor one_d = empty({4});
  EXPECT_THROW(init::orthogonal_(one_d), Error);
}

TEST(Init, GeneratorMakesItDeterministicAndConstants) {
  Generator g1(42), g2(42);
  Tensor a = empty({10, 10}), b = empty({10, 10});
  init::kaiming_uniform_(a, 0.0, init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, &g1);
  init::kaiming_uniform_(b, 0.0, init::FanMode::FanIn, init::Nonlinearity::LeakyRelu, &g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  Tensor o1 = empty({4, 4}), o2 = empty({4, 4});
  Generator g3(7), g4(7);
  init::orthogonal_(o1, 1.0, &g3);
  init::orthogonal_(o2, 1.0, &g4);
  EXPECT_EQ(o1.to_vector<float>(), o2.to_vector<float>());
  // Works on a parameter that requires grad, without recording history.
  Tensor p = empty({3, 3}, {.requires_grad = true});
  init::xavier_uniform_(p);
  init::constant_(p, 0.5);
  EXPECT_TRUE(p.is_leaf());
  EXPECT_EQ(p.to_vector<float>(), std::vector<float>(9, 0.5f));
  init::zeros_(p);
  EXPECT_EQ(p.sum().item(), 0.0);
  init::ones_(p);
  EXPECT_EQ(p.sum().item(), 9.0);
  Tensor u = empty({1000});
  init::uniform_(u, 2.0, 3.0);
  for (float v : u.to_vector<float>()) {
    EXPECT_GE(v, 2.0f);
    EXPECT_LT(v, 3.0f);
  }
  Tensor ints = zeros({2, 2}, {.dtype = DType::Int64});
  EXPECT_THROW(init::kaiming_uniform_(ints), Error);
}
