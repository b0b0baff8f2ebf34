// softmax and log_softmax: the float32 exponential's accuracy deep into the tails (each value
// within a relative bound of a float64 reference, which the op table's tolerance, relative to a
// row's largest value, cannot state), hand-computed large logits and -inf masks, empty and 0-dim
// inputs, and errors. Every dim, views, rows summing to one and the gradients are op-table rows
// (tests/ops/op_rows_reduce.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/ops.h"

using namespace ember;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using Values = std::vector<double>;

// softmax (or log_softmax) of a row-major copy of `a` along `dim`, in float64.
Values ref_softmax(const Tensor& a, int64_t dim, bool log) {
  const Shape& s = a.shape();
  const int64_t nd = a.dim();
  dim = dim < 0 ? dim + nd : dim;
  int64_t A = 1, R = s[dim], C = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (d < dim) A *= s[d];
    if (d > dim) C *= s[d];
  }
  const Values x = a.to_vector<double>();
  Values y(x.size());
  for (int64_t i = 0; i < A; ++i)
    for (int64_t c = 0; c < C; ++c) {
      auto at = [&](int64_t r) { return static_cast<size_t>((i * R + r) * C + c); };
      double m = -kInf;
      for (int64_t r = 0; r < R; ++r) m = std::max(m, x[at(r)]);
      double sum = 0;
      for (int64_t r = 0; r < R; ++r) sum += std::exp(x[at(r)] - m);
      for (int64_t r = 0; r < R; ++r) y[at(r)] = log ? x[at(r)] - m - std::log(sum) : std::exp(x[at(r)] - m) / sum;
    }
  return y;
}

void expect_values(const Tensor& t, const Values& ref, double rtol, double atol) {
  const Values got = t.to_vector<double>();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i]))
      EXPECT_EQ(got[i], ref[i]) << "at " << i;
    else
      EXPECT_NEAR(got[i], ref[i], atol + rtol * std::abs(ref[i])) << "at " << i;
  }
}

template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an ember::Error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Tensor randn_t(Shape s, DType dt, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return mul(randn(std::move(s), {.dtype = dt}, &g), scale);
}

}  // namespace

TEST(Softmax, Float32ExponentialIsAccurateOverAWideRange) {
  // Logits spread over [-80, 80] reach far into the tails of the float32 exponential.
  Tensor a = randn_t({64, 300}, DType::Float32, 2, 30.0);
  // Rounding x - max in float32 costs |x - max| * 2^-24 relative; the exponential adds ~1 ulp.
  expect_values(softmax(a, 1), ref_softmax(a, 1, false), 1e-5, 1e-37);
  expect_values(log_softmax(a, 1), ref_softmax(a, 1, true), 1e-6, 1e-5);
  Tensor lin = linspace(-100, 0, 10001).unsqueeze(0);  // every exponent the kernel can meet
  expect_values(softmax(lin, 1), ref_softmax(lin, 1, false), 3e-6, 1e-44);
}

TEST(Softmax, LargeLogitsAreStable) {
  Tensor a = tensor({{1000, -1000, 1000}, {-1000, -1000, -1000}});
  expect_values(softmax(a, 1), {0.5, 0, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6, 1e-30);
  expect_values(log_softmax(a, 1),
                {-std::log(2.0), -2000 - std::log(2.0), -std::log(2.0), -std::log(3.0), -std::log(3.0), -std::log(3.0)},
                1e-6, 1e-5);
  expect_values(softmax(a, 0), {1, 0.5, 1, 0, 0.5, 0}, 1e-6, 1e-30);
  Tensor d = from_vector<double>({1000, 999, -1000}, {3});
  const double l = std::log1p(std::exp(-1.0));  // log(1 + e^-1 + e^-2000)
  expect_values(log_softmax(d, 0), {-l, -1 - l, -2000 - l}, 1e-14, 1e-12);
}

TEST(Softmax, MinusInfinityMasksGetZeroProbability) {
  Tensor a = from_vector<double>({1, -kInf, 2, -kInf}, {1, 4});
  Values s = softmax(a, 1).to_vector<double>();
  EXPECT_EQ(s[1], 0.0);
  EXPECT_EQ(s[3], 0.0);
  EXPECT_NEAR(s[0] + s[2], 1.0, 1e-15);
  Values l = log_softmax(a, 1).to_vector<double>();
  EXPECT_EQ(l[1], -kInf);
  Tensor f = tensor({0, -INFINITY, 0});
  EXPECT_EQ(softmax(f, 0).to_vector<float>(), (std::vector<float>{0.5f, 0.0f, 0.5f}));
}

TEST(Softmax, EmptyAndZeroDimInputs) {
  EXPECT_EQ(softmax(zeros({0, 3}), 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(log_softmax(zeros({2, 0}), 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(softmax(scalar_tensor(4.0), 0).item(), 1.0);
  EXPECT_EQ(log_softmax(scalar_tensor(4.0), -1).item(), 0.0);
}

TEST(Softmax, Errors) {
  Tensor a = zeros({2, 3});
  expect_error([&] { softmax(a, 2); }, "softmax");
  expect_error([&] { log_softmax(a, -3); }, "log_softmax");
  expect_error([] { softmax(from_vector<int64_t>({1, 2}, {2}), 0); }, "softmax");
  expect_error([] { log_softmax(Tensor(), 0); }, "log_softmax");
}
