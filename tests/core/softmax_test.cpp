// softmax and log_softmax: values against float64 references along every dim, rows summing to
// one, large-logit stability, -inf masks, non-contiguous and empty inputs, errors, gradcheck.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/autograd/gradcheck.h"
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

TEST(Softmax, MatchesReferenceAlongEveryDim) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const double tol = dt == DType::Float32 ? 2e-6 : 1e-14;
    Tensor a = randn_t({3, 4, 5}, dt, 1, 3.0);
    for (int64_t d : {0, 1, 2, -1, -3}) {
      Tensor s = softmax(a, d);
      EXPECT_EQ(s.shape(), a.shape());
      EXPECT_EQ(s.dtype(), dt);
      expect_values(s, ref_softmax(a, d, false), tol, tol * 1e-2);
      expect_values(log_softmax(a, d), ref_softmax(a, d, true), tol, tol);
    }
    expect_values(a.softmax(-1), ref_softmax(a, -1, false), tol, tol * 1e-2);
    expect_values(a.log_softmax(1), ref_softmax(a, 1, true), tol, tol);
  }
}

TEST(Softmax, Float32ExponentialIsAccurateOverAWideRange) {
  // Logits spread over [-80, 80] reach far into the tails of the float32 exponential.
  Tensor a = randn_t({64, 300}, DType::Float32, 2, 30.0);
  // Rounding x - max in float32 costs |x - max| * 2^-24 relative; the exponential adds ~1 ulp.
  expect_values(softmax(a, 1), ref_softmax(a, 1, false), 1e-5, 1e-37);
  expect_values(log_softmax(a, 1), ref_softmax(a, 1, true), 1e-6, 1e-5);
  Tensor lin = linspace(-100, 0, 10001).unsqueeze(0);  // every exponent the kernel can meet
  expect_values(softmax(lin, 1), ref_softmax(lin, 1, false), 3e-6, 1e-44);
}

TEST(Softmax, RowsSumToOne) {
  Tensor a = randn_t({7, 33, 9}, DType::Float32, 3, 5.0);
  for (int64_t d : {0, 1, 2}) {
    Values s = softmax(a, d).sum({d}).to_vector<double>();
    for (double v : s) EXPECT_NEAR(v, 1.0, 1e-6);
  }
  Tensor wide = randn_t({3, 100000}, DType::Float32, 4, 2.0);
  for (double v : softmax(wide, 1).sum({1}).to_vector<double>()) EXPECT_NEAR(v, 1.0, 1e-5);
}

TEST(Softmax, LargeLogitsAreStable) {
  Tensor a = tensor({{1000, -1000, 1000}, {-1000, -1000, -1000}});
  expect_values(softmax(a, 1), {0.5, 0, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-6, 1e-30);
  expect_values(log_softmax(a, 1),
                {-std::log(2.0), -2000 - std::log(2.0), -std::log(2.0), -std::log(3.0), -std::log(3.0), -std::log(3.0)},
                1e-6, 1e-5);
  expect_values(softmax(a, 0), {1, 0.5, 1, 0, 0.5, 0}, 1e-6, 1e-30);
  Tensor d = from_vector<double>({1000, 999, -1000}, {3});
  expect_values(log_softmax(d, 0), ref_softmax(d, 0, true), 1e-14, 1e-12);
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

TEST(Softmax, NonContiguousEmptyAndZeroDimInputs) {
  Tensor base = randn_t({5, 6, 4}, DType::Float64, 5);
  for (const Tensor& v :
       {base.transpose(0, 2), base.slice(1, 0, 6, 2), base.select(2, 1).unsqueeze(2).expand({5, 6, 3})})
    for (int64_t d : {0, 1, 2}) {
      expect_values(softmax(v, d), ref_softmax(v, d, false), 1e-14, 1e-16);
      expect_values(log_softmax(v, d), ref_softmax(v, d, true), 1e-14, 1e-14);
    }
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

TEST(Softmax, Gradcheck) {
  Generator g(6);
  Tensor x = randn({3, 4, 5}, {.dtype = DType::Float64}, &g).detach().requires_grad_();
  for (int64_t d : {0, 1, 2, -1})
    for (bool log : {false, true}) {
      auto r = gradcheck([&](const std::vector<Tensor>& in) { return log ? log_softmax(in[0], d) : softmax(in[0], d); },
                         {x});
      EXPECT_TRUE(r.ok) << (log ? "log_softmax" : "softmax") << " dim " << d << ": " << r.message;
    }
  auto r = gradcheck([](const std::vector<Tensor>& in) { return softmax(in[0].transpose(0, 2), 1); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
  r = gradcheck([](const std::vector<Tensor>& in) { return log_softmax(in[0].slice(1, 0, 4, 2), 2); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Softmax, BackwardMatchesTheClosedForm) {
  // Float32 backward through the fast kernels, against the float64 formulas.
  Tensor x = randn_t({4, 7}, DType::Float32, 7, 2.0).detach().requires_grad_();
  Tensor w = randn_t({4, 7}, DType::Float32, 8);
  (softmax(x, 1) * w).sum().backward();
  Values y = ref_softmax(x.detach(), 1, false), wv = w.to_vector<double>(), want(28);
  for (int64_t i = 0; i < 4; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < 7; ++j) dot += y[i * 7 + j] * wv[i * 7 + j];
    for (int64_t j = 0; j < 7; ++j) want[i * 7 + j] = y[i * 7 + j] * (wv[i * 7 + j] - dot);
  }
  expect_values(x.grad(), want, 1e-5, 1e-6);
  Tensor x2 = x.detach().t().contiguous().requires_grad_();  // [7, 4]: softmax over dim 0
  (log_softmax(x2, 0) * w.t()).sum().backward();
  Values want2(28);
  for (int64_t i = 0; i < 4; ++i) {
    double gs = 0;
    for (int64_t j = 0; j < 7; ++j) gs += wv[i * 7 + j];
    for (int64_t j = 0; j < 7; ++j) want2[j * 4 + i] = wv[i * 7 + j] - y[i * 7 + j] * gs;
  }
  expect_values(x2.grad(), want2, 1e-5, 1e-6);
}
