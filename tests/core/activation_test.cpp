// Unary math (neg, abs, sign, exp, log, log1p, sqrt, rsqrt, square, clamp, pow) and the
// activations: forward values against std:: / long double references in float64 and float32 over
// values that include the edges (per element, with IEEE's infinities and NaN: the op table's
// reference is the float64 op itself and its tolerance relative to a row's largest value, so it
// cannot state these), integer inputs, saturation, PyTorch's subgradient conventions, the saved
// tensors' version checks and errors. The vectorised path against the strided one, the float32
// backward kernels against float64 and the finite differences (plain and through views) are
// op-table rows (tests/ops/op_rows_elementwise.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/core/elementwise_test_util.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using UnaryFn = std::function<Tensor(const Tensor&)>;
using RefFn = std::function<double(double)>;

// Edge values plus a dense grid over [-25, 25].
std::vector<double> test_values() {
  std::vector<double> v = {-1e30, -100, -88, -50, -20,  -10.5, -3, -1, -0.5, -1e-3, -1e-20, -0.0, 0.0,   1e-20,
                           1e-3,  0.5,  1,   3,   10.5, 20,    50, 88, 100,  1e10,  1e30,   kInf, -kInf, kNaN};
  for (int i = 0; i <= 1000; ++i) v.push_back(-25.0 + 0.05 * i + 1e-3);
  return v;
}

// Checks op in float64 (against ref to rtol64) and in float32 (against ref32, or ref, of the
// float-rounded input, to rtol32/atol32).
void check_forward(const char* name, const UnaryFn& op, const RefFn& ref, double rtol64, double rtol32,
                   double atol32 = 1e-44, std::vector<double> xs = test_values(), RefFn ref32 = nullptr) {
  if (!ref32) ref32 = ref;
  SCOPED_TRACE(name);
  const int64_t n = static_cast<int64_t>(xs.size());
  auto y64 = vals(op(from_vector<double>(xs, {n})));
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_TRUE(close_to(y64[i], ref(xs[i]), rtol64, 1e-300)) << "x = " << xs[i];
  std::vector<float> xf(xs.begin(), xs.end());
  Tensor y = op(from_vector<float>(xf, {n}));
  ASSERT_EQ(y.dtype(), DType::Float32);
  auto y32 = y.to_vector<float>();
  for (size_t i = 0; i < xf.size(); ++i)
    EXPECT_TRUE(close_to_f32(y32[i], ref32(static_cast<double>(xf[i])), rtol32, atol32)) << "x = " << xf[i];
}

long double ref_gelu(long double x) {
  return x * 0.5L * std::erfc(-x / std::sqrt(2.0L));
}
// 0.5 x (1 + tanh(u)) = x / (1 + e^{-2u}): the identity, evaluated without cancellation.
long double ref_gelu_tanh(long double x) {
  const long double u = std::sqrt(2.0L / 3.14159265358979323846264338327950288L) * (x + 0.044715L * x * x * x);
  return x / (1.0L + std::exp(-2.0L * u));
}
long double ref_sigmoid(long double x) {
  return 1.0L / (1.0L + std::exp(-x));
}
long double ref_softplus(long double x, long double beta, long double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

}  // namespace

// ------------------------------------------------------------ forward values

TEST(UnaryMath, ForwardMatchesReferences) {
  check_forward(
      "neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, 0, 0);
  check_forward(
      "abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, 0, 0);
  check_forward(
      "sign", [](const Tensor& x) { return sign(x); }, [](double x) { return double((0 < x) - (x < 0)); }, 0, 0);
  check_forward(
      "exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, 1e-15, 1.2e-7);
  check_forward(
      "log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 1e-15, 1.2e-7);
  check_forward(
      "log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return std::log1p(x); }, 1e-15, 2.4e-7);
  check_forward(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 1e-16, 6e-8);
  check_forward(
      "rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 2.3e-16, 1.2e-7);
  check_forward(
      "square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, 1.2e-16, 6e-8);
}

TEST(UnaryMath, ClampVariants) {
  auto both = [](double x) { return std::isnan(x) ? x : std::min(std::max(x, -1.5), 2.0); };
  check_forward(
      "clamp", [](const Tensor& x) { return clamp(x, -1.5, 2.0); }, both, 0, 0);
  check_forward(
      "clamp min", [](const Tensor& x) { return clamp(x, 0.5, std::nullopt); },
      [](double x) { return std::isnan(x) ? x : std::max(x, 0.5); }, 0, 0);
  check_forward(
      "clamp max", [](const Tensor& x) { return clamp(x, std::nullopt, -0.5); },
      [](double x) { return std::isnan(x) ? x : std::min(x, -0.5); }, 0, 0);
  // min > max: every element becomes max, as PyTorch.
  EXPECT_EQ(vals(clamp(f64({-5, 0, 5}), 2.0, 1.0)), (std::vector<double>{1, 1, 1}));
  Tensor i = tensor({-5, 0, 5}, {.dtype = DType::Int32});
  EXPECT_EQ(clamp(i, -1.0, 1.0).dtype(), DType::Int32);
  EXPECT_EQ(vals(clamp(i, -1.0, 1.0)), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(clamp(i, -1.5, 1.5).dtype(), DType::Float32);  // non-integer bounds promote
  EXPECT_EQ(vals(clamp(i, -1.5, 1.5)), (std::vector<double>{-1.5, 0, 1.5}));
  EXPECT_EQ(vals(clamp(tensor({0, 200}, {.dtype = DType::UInt8}), 1e9, std::nullopt)),
            (std::vector<double>{255, 255}));  // bounds saturate to the dtype's range
  expect_error([] { clamp(ones({2}), std::nullopt, std::nullopt); }, {"clamp", "min", "max"});
}

TEST(UnaryMath, PowScalarExponents) {
  std::vector<double> xs;
  for (int i = 0; i <= 400; ++i) xs.push_back(-10.0 + 0.05 * i + 1e-3);
  for (double x : {0.0, 1e-10, 1e10, -1e10, kInf, kNaN}) xs.push_back(x);
  for (double e : {0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 1.7, -0.3, 4.0}) {
    // A float32 tensor's exponent is a float32 too (so x^1.7 is x^1.70000005 there), as in PyTorch.
    const double ef = static_cast<float>(e);
    check_forward(("pow " + std::to_string(e)).c_str(), [e](const Tensor& x) { return pow(x, e); },
                  [e](double x) { return std::pow(x, e); }, 4.5e-16, 2.4e-7, 1e-44, xs,
                  [ef](double x) { return std::pow(x, ef); });
  }
  // 0.5 and -0.5 run as sqrt and 1/sqrt (so pow(-inf, 0.5) is NaN, as in PyTorch).
  check_forward(
      "pow 0.5", [](const Tensor& x) { return pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, 1e-16, 6e-8, 1e-44,
      xs);
  check_forward(
      "pow -0.5", [](const Tensor& x) { return pow(x, -0.5); }, [](double x) { return 1 / std::sqrt(x); }, 2.3e-16,
      1.2e-7, 1e-44, xs);
  // Integer tensors: integral exponents stay integral, others promote.
  Tensor i = tensor({-3, 2, 5}, {.dtype = DType::Int32});
  EXPECT_EQ(pow(i, 3.0).dtype(), DType::Int32);
  EXPECT_EQ(vals(pow(i, 3.0)), (std::vector<double>{-27, 8, 125}));
  EXPECT_EQ(vals(pow(i, 0.0)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(pow(i, 0.5).dtype(), DType::Float32);
  EXPECT_EQ(vals(i.pow(2.0)), (std::vector<double>{9, 4, 25}));
}

TEST(UnaryMath, IntegerInputs) {
  Tensor i = tensor({-2, 0, 3}, {.dtype = DType::Int64});
  EXPECT_EQ(neg(i).dtype(), DType::Int64);
  EXPECT_EQ(vals(neg(i)), (std::vector<double>{2, 0, -3}));
  EXPECT_EQ(vals(abs(i)), (std::vector<double>{2, 0, 3}));
  EXPECT_EQ(vals(sign(i)), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(vals(square(i)), (std::vector<double>{4, 0, 9}));
  EXPECT_EQ(relu(i).dtype(), DType::Int64);
  EXPECT_EQ(vals(relu(i)), (std::vector<double>{0, 0, 3}));
  Tensor u = tensor({0, 7}, {.dtype = DType::UInt8});
  EXPECT_EQ(vals(sign(u)), (std::vector<double>{0, 1}));
  EXPECT_EQ(vals(abs(u)), (std::vector<double>{0, 7}));
  // Floating functions of integers compute in float32.
  for (auto [name, t] : {std::pair{"exp", exp(i)},
                         {"log1p", log1p(abs(i))},
                         {"sqrt", sqrt(abs(i))},
                         {"sigmoid", sigmoid(i)},
                         {"gelu", gelu(i)},
                         {"tanh", tanh(i)}}) {
    EXPECT_EQ(t.dtype(), DType::Float32) << name;
  }
  EXPECT_FLOAT_EQ(exp(i).to_vector<float>()[2], std::exp(3.0f));
}

TEST(UnaryMath, MemberMethods) {
  Tensor x = f64({0.25, 4});
  EXPECT_EQ(vals(x.sqrt()), (std::vector<double>{0.5, 2}));
  EXPECT_EQ(vals(x.log()), (std::vector<double>{std::log(0.25), std::log(4.0)}));
  EXPECT_EQ(vals(x.exp()), (std::vector<double>{std::exp(0.25), std::exp(4.0)}));
  EXPECT_EQ(vals((-x).abs()), (std::vector<double>{0.25, 4}));
  EXPECT_EQ(vals(x.pow(2.0)), (std::vector<double>{0.0625, 16}));
  EXPECT_EQ(vals((x - 1.0).relu()), (std::vector<double>{0, 3}));
  EXPECT_EQ(vals(x.tanh()), (std::vector<double>{std::tanh(0.25), std::tanh(4.0)}));
  EXPECT_TRUE(close_to(vals(x.sigmoid())[1], 1 / (1 + std::exp(-4.0)), 1e-15));
}

TEST(UnaryMath, EmptyTensorsKeepTheirShape) {
  Tensor e = zeros({2, 0});
  for (const Tensor& t : {exp(e), log(e), sqrt(e), clamp(e, 0.0, 1.0), pow(e, 1.5), relu(e), gelu(e), softplus(e)})
    EXPECT_EQ(t.shape(), (Shape{2, 0}));
}

TEST(Activation, ForwardMatchesReferences) {
  check_forward(
      "relu", [](const Tensor& x) { return relu(x); }, [](double x) { return std::isnan(x) ? x : std::max(x, 0.0); }, 0,
      0);
  check_forward(
      "leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.125); },
      [](double x) { return x > 0 ? x : 0.125 * x; }, 0, 0);
  check_forward(
      "elu", [](const Tensor& x) { return elu(x, 1.5); }, [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); },
      1e-15, 4e-7);
  check_forward(
      "gelu", [](const Tensor& x) { return gelu(x); }, [](double x) { return double(ref_gelu(x)); }, 1e-12, 6e-7,
      1e-40);
  check_forward(
      "sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return double(ref_sigmoid(x)); }, 1e-15,
      2.4e-7);
  check_forward(
      "tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, 1e-15, 2e-7);
  check_forward(
      "softplus", [](const Tensor& x) { return softplus(x, 2.0, 15.0); },
      [](double x) { return double(ref_softplus(x, 2, 15)); }, 1e-15, 4e-7);
  check_forward(
      "softplus default", [](const Tensor& x) { return softplus(x); },
      [](double x) { return double(ref_softplus(x, 1, 20)); }, 1e-15, 4e-7);
}

TEST(Activation, GeluTanhApproximation) {
  // Against the x / (1 + e^{-2u}) form in long double everywhere; float32 loses ~|u| ulps in the
  // lower tail from rounding u itself (the function's own conditioning), hence the looser bound.
  check_forward(
      "gelu tanh", [](const Tensor& x) { return gelu(x, true); }, [](double x) { return double(ref_gelu_tanh(x)); },
      2e-13, 2e-5, 1e-40);
  // And against the textbook 0.5 x (1 + tanh(u)) where that has no cancellation.
  Tensor x = uniform64({200}, -3, 3, 31);
  auto y = vals(gelu(x, true));
  auto xv = vals(x);
  for (size_t i = 0; i < y.size(); ++i) {
    const double u = std::sqrt(2 / M_PI) * (xv[i] + 0.044715 * xv[i] * xv[i] * xv[i]);
    EXPECT_TRUE(close_to(y[i], 0.5 * xv[i] * (1 + std::tanh(u)), 1e-12, 1e-15));
  }
  // Close to the exact gelu (the approximation's own error is below 1e-3).
  EXPECT_TRUE(allclose(gelu(x, true), gelu(x), 0, 1e-3));
}

TEST(Activation, Saturation) {
  EXPECT_EQ(vals(sigmoid(f64({-1000, 1000}))), (std::vector<double>{0, 1}));
  EXPECT_EQ(vals(tanh(f64({-1000, 1000}))), (std::vector<double>{-1, 1}));
  EXPECT_EQ(vals(softplus(f64({1000, -1000}))), (std::vector<double>{1000, 0}));
  EXPECT_EQ(vals(elu(f64({-1000}), 2.0)), (std::vector<double>{-2}));
  EXPECT_EQ(tensor({-1000, 1000}).sigmoid().to_vector<float>(), (std::vector<float>{0, 1}));
}

// ------------------------------------------------------------ gradients

TEST(ActivationGrad, SubgradientConventions) {
  auto grad_of = [](const UnaryFn& op, std::initializer_list<double> xs) {
    Tensor x = leaf(f64(xs));
    op(x).sum().backward();
    return vals(x.grad());
  };
  EXPECT_EQ(grad_of([](const Tensor& x) { return relu(x); }, {-1, 0, 2}), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return abs(x); }, {-1, 0, 2}), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return sign(x); }, {-1, 0, 2}), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return clamp(x, 0.0, 1.0); }, {-1, 0, 0.5, 1, 2}),
            (std::vector<double>{0, 1, 1, 1, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return clamp(x, std::nullopt, 1.0); }, {-1, 1, 2}),
            (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return leaky_relu(x, 0.1); }, {-1, 0, 2}),
            (std::vector<double>{0.1, 0.1, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return elu(x, 2.0); }, {0, 1}), (std::vector<double>{2, 1}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return pow(x, 0.0); }, {0, 3}), (std::vector<double>{0, 0}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return gelu(x); }, {0}), (std::vector<double>{0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return gelu(x, true); }, {0}), (std::vector<double>{0.5}));
  EXPECT_EQ(grad_of([](const Tensor& x) { return softplus(x, 1.0, 20.0); }, {0, 25}), (std::vector<double>{0.5, 1}));
  // hardtanh, unlike clamp, passes no gradient at its limits (as PyTorch).
  EXPECT_EQ(grad_of([](const Tensor& x) { return hardtanh(x, -1.0, 1.0); }, {-2, -1, 0.5, 1, 2}),
            (std::vector<double>{0, 0, 1, 0, 0}));
}

TEST(ActivationGrad, SavedOutputsAndInputs) {
  // Ops that save their output (exp, sqrt, sigmoid, tanh, relu) fail when it is changed in place.
  for (const UnaryFn& op :
       std::vector<UnaryFn>{[](const Tensor& x) { return exp(x); }, [](const Tensor& x) { return sigmoid(x); },
                            [](const Tensor& x) { return tanh(x); }, [](const Tensor& x) { return relu(x); }}) {
    Tensor x = leaf(f64({0.5, 1}));
    Tensor y = op(x);
    y.mul_(2.0);
    expect_error([&] { y.sum().backward(); }, {"modified by an in-place operation"});
  }
  // Ops that save their input fail when the input is changed.
  Tensor w = leaf(f64({0.5, 1}));
  Tensor x = w * 1.0;
  Tensor y = gelu(x);
  x.add_(1.0);
  expect_error([&] { y.sum().backward(); }, {"modified by an in-place operation"});
}

TEST(ActivationErrors, ArgumentsAndDTypes) {
  expect_error([] { softplus(ones({2}), 0.0); }, {"softplus", "beta"});
  expect_error([] { hardtanh(ones({2}), 1.0, 1.0); }, {"hardtanh", "min_val", "max_val"});
  expect_error([] { sigmoid(tensor({1, 0}, {.dtype = DType::Bool}).to(DType::BFloat16)); }, {"sigmoid", "bfloat16"});
  expect_error([] { relu(tensor({1, 0}, {.dtype = DType::Bool})); }, {"relu", "bool"});
  expect_error([] { abs(tensor({1}, {.dtype = DType::Float16})); }, {"abs", "float16"});
}
