// Binary elementwise ops, comparisons, logic, where, in-place ops: float64 arithmetic against C++'s
// own (exact IEEE results the op table cannot state: its reference is the op itself), hand-computed
// values, broadcasting, dtype promotion, gradient values and conventions, in-place semantics
// (versions, aliasing, views, autograd's checks) and every error kind. float32 rounding, views, the
// finite differences (also through in-place ops) are op-table rows (tests/ops/op_rows_elementwise.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/autograd/grad_mode.h"
#include "tests/core/elementwise_test_util.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// out[i, j] = f(a[i, j], b[j]) for a [rows, cols] and b [cols], computed in double.
template <typename F>
std::vector<double> broadcast_ref(const Tensor& a, const Tensor& b, F f) {
  auto av = vals(a), bv = vals(b);
  const size_t cols = bv.size();
  std::vector<double> r(av.size());
  for (size_t i = 0; i < av.size(); ++i) r[i] = f(av[i], bv[i % cols]);
  return r;
}

}  // namespace

// ------------------------------------------------------------ arithmetic values

TEST(Elementwise, ArithmeticMatchesReferenceWithBroadcastFloat64) {
  Tensor a = randn64({4, 5}, 1), b = randn64({5}, 2) + 3.0;
  struct Case {
    Tensor out;
    std::function<double(double, double)> ref;
  } cases[] = {
      {add(a, b), [](double x, double y) { return x + y; }},
      {add(a, b, 2.5), [](double x, double y) { return x + 2.5 * y; }},
      {sub(a, b), [](double x, double y) { return x - y; }},
      {sub(a, b, -0.5), [](double x, double y) { return x + 0.5 * y; }},
      {mul(a, b), [](double x, double y) { return x * y; }},
      {div(a, b), [](double x, double y) { return x / y; }},
      {maximum(a, b), [](double x, double y) { return std::max(x, y); }},
      {minimum(a, b), [](double x, double y) { return std::min(x, y); }},
      {pow(abs(a), b), [](double x, double y) { return std::pow(std::fabs(x), y); }},
  };
  for (auto& c : cases) {
    ASSERT_EQ(c.out.shape(), (Shape{4, 5}));
    ASSERT_EQ(c.out.dtype(), DType::Float64);
    auto got = vals(c.out);
    auto want = broadcast_ref(a, b, c.ref);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(close_to(got[i], want[i], 1e-15)) << i;
  }
}

TEST(Elementwise, BroadcastingShapes) {
  Tensor col = tensor({1, 2}).reshape({2, 1});
  Tensor row = tensor({10, 20, 30});
  Tensor s = scalar_tensor(100.0);  // 0-dim
  EXPECT_EQ((col + row).shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(col + row), (std::vector<double>{11, 21, 31, 12, 22, 32}));
  EXPECT_EQ(vals(row * s), (std::vector<double>{1000, 2000, 3000}));
  EXPECT_EQ((s + s).shape(), Shape{});
  EXPECT_EQ(broadcast_shapes({5, 1, 4}, {3, 1}, "x"), (Shape{5, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {2, 2}, "x"), (Shape{2, 2}));
}

TEST(Elementwise, LargeTensorsUseThreadedPathsCorrectly) {
  const int64_t n = 300001;  // above the parallel grain, odd so that chunks are uneven
  Tensor a = arange(0.0, static_cast<double>(n), 1.0, {.dtype = DType::Float32});
  Tensor b = full({n}, 0.5);
  auto r = (a * b + 1.0).to_vector<float>();
  for (int64_t i = 0; i < n; i += 9973) EXPECT_EQ(r[i], static_cast<float>(i) * 0.5f + 1.0f);
  EXPECT_EQ(r[n - 1], static_cast<float>(n - 1) * 0.5f + 1.0f);
  // A transposed large operand takes the strided path.
  Tensor m = a.slice(0, 0, 300000).reshape({600, 500});
  auto s = (m.t() + 0.0).contiguous().to_vector<float>();
  EXPECT_EQ(s[1], 500.0f);
  EXPECT_EQ(s[600], 1.0f);
}

TEST(Elementwise, EmptyTensors) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ((e + tensor({1, 2, 3})).shape(), (Shape{0, 3}));
  EXPECT_EQ(maximum(e, e).numel(), 0);
  EXPECT_EQ(lt(e, 1.0).shape(), (Shape{0, 3}));
  EXPECT_EQ(where(lt(e, 0.0), e, 1.0 * e).shape(), (Shape{0, 3}));
  EXPECT_TRUE(allclose(e, e));
  EXPECT_TRUE(equal(e, e));
  Tensor f = zeros({0});
  f.add_(1.0);
  EXPECT_EQ(f.numel(), 0);
}

TEST(Elementwise, MaximumMinimumPropagateNaNAndWorkOnIntegers) {
  Tensor a = f64({1, kNaN, 3, -kInf}), b = f64({2, 0, kNaN, 5});
  auto mx = vals(maximum(a, b)), mn = vals(minimum(a, b));
  EXPECT_EQ(mx[0], 2);
  EXPECT_TRUE(std::isnan(mx[1]));
  EXPECT_TRUE(std::isnan(mx[2]));
  EXPECT_EQ(mx[3], 5);
  EXPECT_EQ(mn[0], 1);
  EXPECT_TRUE(std::isnan(mn[1]));
  EXPECT_TRUE(std::isnan(mn[2]));
  EXPECT_EQ(mn[3], -kInf);
  Tensor i = tensor({-3, 7, 2}, {.dtype = DType::Int32});
  Tensor m = maximum(i, tensor({0, 0, 5}, {.dtype = DType::Int32}));
  EXPECT_EQ(m.dtype(), DType::Int32);
  EXPECT_EQ(vals(m), (std::vector<double>{0, 7, 5}));
}

TEST(Elementwise, PowTensorExponentsIncludingIntegers) {
  Tensor i = tensor({2, 3, -2, 1, -1, -1, 5}, {.dtype = DType::Int64});
  Tensor e = tensor({10, 0, 3, -4, -3, -2, -1}, {.dtype = DType::Int64});
  Tensor p = pow(i, e);
  EXPECT_EQ(p.dtype(), DType::Int64);
  // Negative exponents as PyTorch: 1 and -1 exact, others truncate to 0.
  EXPECT_EQ(vals(p), (std::vector<double>{1024, 1, -8, 1, -1, 1, 0}));
  auto fp = vals(pow(f64({4, -8, 0}), f64({0.5, 1.0 / 3, 0})));
  EXPECT_EQ(fp[0], 2);
  EXPECT_TRUE(std::isnan(fp[1]));  // negative base, non-integer exponent
  EXPECT_EQ(fp[2], 1);
}

TEST(Elementwise, DivisionIsTrueDivision) {
  Tensor a = tensor({7, -7, 1}, {.dtype = DType::Int32}), b = tensor({2, 2, 0}, {.dtype = DType::Int32});
  Tensor q = a / b;
  EXPECT_EQ(q.dtype(), DType::Float32);
  EXPECT_EQ(vals(q), (std::vector<double>{3.5, -3.5, kInf}));
  EXPECT_EQ(vals(div(a, 4.0)), (std::vector<double>{1.75, -1.75, 0.25}));
  EXPECT_EQ(div(a, 4.0).dtype(), DType::Float32);
  EXPECT_EQ(vals(2.0 / tensor({4, 8}, {.dtype = DType::Int64})), (std::vector<double>{0.5, 0.25}));
}

TEST(Elementwise, ScalarOperandsAndOperators) {
  Tensor a = f64({1, 2, 4});
  EXPECT_EQ(vals(a + 1.0), (std::vector<double>{2, 3, 5}));
  EXPECT_EQ(vals(1.0 + a), (std::vector<double>{2, 3, 5}));
  EXPECT_EQ(vals(a - 1.0), (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(vals(1.0 - a), (std::vector<double>{0, -1, -3}));
  EXPECT_EQ(vals(rsub(a, 10.0)), (std::vector<double>{9, 8, 6}));
  EXPECT_EQ(vals(a * 3.0), (std::vector<double>{3, 6, 12}));
  EXPECT_EQ(vals(3.0 * a), (std::vector<double>{3, 6, 12}));
  EXPECT_EQ(vals(a / 4.0), (std::vector<double>{0.25, 0.5, 1}));
  EXPECT_EQ(vals(4.0 / a), (std::vector<double>{4, 2, 1}));
  EXPECT_EQ(vals(-a), (std::vector<double>{-1, -2, -4}));
  EXPECT_EQ((a + 1.0).dtype(), DType::Float64);
  // The double operand takes the tensor's dtype.
  Tensor f = tensor({1, 2});
  EXPECT_EQ((f * 0.1).dtype(), DType::Float32);
  EXPECT_EQ((f * 0.1).to_vector<float>()[0], 0.1f);
}

// ------------------------------------------------------------ dtype promotion

TEST(Elementwise, DTypePromotion) {
  Tensor i32 = tensor({1, 2}, {.dtype = DType::Int32});
  Tensor i64 = tensor({1, 2}, {.dtype = DType::Int64});
  Tensor u8 = tensor({1, 2}, {.dtype = DType::UInt8});
  Tensor f32 = tensor({0.5, 0.5});
  Tensor f64t = tensor({0.25, 0.25}, {.dtype = DType::Float64});
  Tensor b = tensor({1, 0}, {.dtype = DType::Bool});
  EXPECT_EQ((i32 + f32).dtype(), DType::Float32);
  EXPECT_EQ(vals(i32 + f32), (std::vector<double>{1.5, 2.5}));
  EXPECT_EQ((i32 + i64).dtype(), DType::Int64);
  EXPECT_EQ((u8 * i32).dtype(), DType::Int32);
  EXPECT_EQ((f32 - f64t).dtype(), DType::Float64);
  EXPECT_EQ((b * f32).dtype(), DType::Float32);
  EXPECT_EQ(vals(b * f32), (std::vector<double>{0.5, 0}));
  // Scalars: an integer tensor stays integral with an integral scalar, becomes float32 otherwise.
  EXPECT_EQ((i32 + 2.0).dtype(), DType::Int32);
  EXPECT_EQ(vals(i32 + 2.0), (std::vector<double>{3, 4}));
  EXPECT_EQ((i32 + 2.5).dtype(), DType::Float32);
  EXPECT_EQ(vals(i32 + 2.5), (std::vector<double>{3.5, 4.5}));
  EXPECT_EQ((i64 * 0.5).dtype(), DType::Float32);
  EXPECT_EQ((b + 1.0).dtype(), DType::Int64);
  EXPECT_EQ(vals(b + 1.0), (std::vector<double>{2, 1}));
  EXPECT_EQ(maximum(i32, f64t).dtype(), DType::Float64);
  EXPECT_EQ(where(gt(f32, 0.0), i32, f32).dtype(), DType::Float32);
}

TEST(Elementwise, GradientHasTheInputsDType) {
  Tensor a = leaf(tensor({1, 2}));                             // float32
  Tensor b = leaf(tensor({3, 4}, {.dtype = DType::Float64}));  // float64
  Tensor y = a * b;
  EXPECT_EQ(y.dtype(), DType::Float64);
  y.sum().backward();
  EXPECT_EQ(a.grad().dtype(), DType::Float32);
  EXPECT_EQ(b.grad().dtype(), DType::Float64);
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{3, 4}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1, 2}));
}

// ------------------------------------------------------------ comparisons, logic, where

TEST(Elementwise, ComparisonsReturnBool) {
  Tensor a = f64({1, 2, 3, kNaN}), b = f64({2, 2, 2, kNaN});
  EXPECT_EQ(eq(a, b).dtype(), DType::Bool);
  EXPECT_EQ(vals(eq(a, b)), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(vals(ne(a, b)), (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(vals(lt(a, b)), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(vals(le(a, b)), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(vals(gt(a, b)), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(vals(ge(a, b)), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(vals(eq(a, 2.0)), (std::vector<double>{0, 1, 0, 0}));
  EXPECT_EQ(vals(ne(a, 2.0)), (std::vector<double>{1, 0, 1, 1}));
  EXPECT_EQ(vals(lt(a, 2.0)), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(vals(le(a, 2.0)), (std::vector<double>{1, 1, 0, 0}));
  EXPECT_EQ(vals(gt(a, 2.0)), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(vals(ge(a, 2.0)), (std::vector<double>{0, 1, 1, 0}));
  // Broadcast, mixed dtypes, and a non-integral scalar against an integer tensor.
  Tensor i = tensor({1, 2, 3}, {.dtype = DType::Int32});
  EXPECT_EQ(lt(tensor({0.5, 2.5}).reshape({2, 1}), i).shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(lt(tensor({0.5, 2.5}).reshape({2, 1}), i)), (std::vector<double>{1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(vals(eq(i, 2.5)), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(vals(gt(i, 2.5)), (std::vector<double>{0, 0, 1}));
  Tensor bl = tensor({1, 0}, {.dtype = DType::Bool});
  EXPECT_EQ(vals(eq(bl, tensor({1, 1}, {.dtype = DType::Bool}))), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(eq(tensor({1, 2}, {.dtype = DType::Float16}), 2.0)), (std::vector<double>{0, 1}));
}

TEST(Elementwise, LogicalOps) {
  Tensor a = tensor({1, 1, 0, 0}, {.dtype = DType::Bool}), b = tensor({1, 0, 1, 0}, {.dtype = DType::Bool});
  EXPECT_EQ(vals(logical_and(a, b)), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(vals(logical_or(a, b)), (std::vector<double>{1, 1, 1, 0}));
  EXPECT_EQ(vals(logical_not(a)), (std::vector<double>{0, 0, 1, 1}));
  EXPECT_EQ(logical_not(a).dtype(), DType::Bool);
  // Non-bool operands count as true when non-zero (NaN included).
  Tensor f = f64({0, 2, kNaN, -0.0});
  EXPECT_EQ(vals(logical_not(f)), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ(vals(logical_and(f, tensor({5}, {.dtype = DType::Int32}))), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(logical_or(tensor({1, 0}).reshape({2, 1}), tensor({0, 0, 1})).shape(), (Shape{2, 3}));
}

TEST(Elementwise, WhereBroadcastsAllThreeOperands) {
  Tensor cond = tensor({1, 0}, {.dtype = DType::Bool}).reshape({2, 1});
  Tensor a = f64({1, 2, 3});                                  // [3]
  Tensor b = scalar_tensor(-1.0, {.dtype = DType::Float64});  // []
  Tensor w = where(cond, a, b);
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2, 3, -1, -1, -1}));
  EXPECT_EQ(vals(where(tensor({1, 0}, {.dtype = DType::Bool}), tensor({1, 2}, {.dtype = DType::Int64}),
                       tensor({7, 8}, {.dtype = DType::Int64}))),
            (std::vector<double>{1, 8}));
}

TEST(Elementwise, AllcloseAndEqual) {
  Tensor a = f64({1, 2, 3});
  EXPECT_TRUE(allclose(a, a + 1e-9));
  EXPECT_FALSE(allclose(a, a + 1e-3));
  EXPECT_TRUE(allclose(a, a + 1e-3, 0.0, 2e-3));
  EXPECT_TRUE(allclose(a, a * (1 + 1e-4), 2e-4, 0.0));
  EXPECT_FALSE(allclose(f64({kNaN}), f64({kNaN})));
  EXPECT_TRUE(allclose(f64({kInf}), f64({kInf})));
  EXPECT_FALSE(allclose(f64({kInf}), f64({-kInf})));
  EXPECT_TRUE(allclose(tensor({{1, 1}, {1, 1}}), tensor({1, 1})));  // broadcasts
  EXPECT_TRUE(allclose(tensor({1, 2}, {.dtype = DType::Int32}), tensor({1, 2.0000001})));
  EXPECT_TRUE(equal(a, f64({1, 2, 3})));
  EXPECT_FALSE(equal(a, f64({1, 2, 4})));
  EXPECT_FALSE(equal(a, f64({1, 2})));
  EXPECT_FALSE(equal(tensor({{1, 1}}), tensor({1, 1})));  // shapes differ: no broadcasting
  EXPECT_FALSE(equal(f64({kNaN}), f64({kNaN})));
  EXPECT_TRUE(equal(tensor({1, 2}, {.dtype = DType::Int64}), tensor({1, 2})));
  expect_error([] { allclose(zeros({2}), zeros({3})); }, {"allclose", "[2]", "[3]"});
}

// ------------------------------------------------------------ gradients

TEST(ElementwiseGrad, WhereGradientGoesToTheChosenSide) {
  Tensor x = leaf(f64({1, 2, 3})), y = leaf(f64({4, 5, 6}));
  where(tensor({1, 0, 1}, {.dtype = DType::Bool}), x, y).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{0, 1, 0}));
}

TEST(ElementwiseGrad, MaximumMinimumSplitTiesHalfHalf) {
  Tensor a = leaf(f64({1, 2, 3})), b = leaf(f64({2, 2, 1}));
  maximum(a, b).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1, 0.5, 0}));
  Tensor c = leaf(f64({1, 2, 3})), d = leaf(f64({2, 2, 1}));
  minimum(c, d).sum().backward();
  EXPECT_EQ(vals(c.grad()), (std::vector<double>{1, 0.5, 0}));
  EXPECT_EQ(vals(d.grad()), (std::vector<double>{0, 0.5, 1}));
}

TEST(ElementwiseGrad, PowGradientSpecialCases) {
  // d/da a^b at b == 0 is 0 (even at a == 0); d/db at a == 0 with b >= 0 is 0, not NaN.
  Tensor a = leaf(f64({0, 2, 0})), b = leaf(f64({0, 0, 2}));
  pow(a, b).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{0, std::log(2.0), 0}));
  Tensor x = leaf(f64({3}));
  pow(x, 3.0).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{27}));
}

TEST(ElementwiseGrad, AddAndMulBackwardValues) {
  Tensor a = leaf(f64({1, 2, 3})), b = leaf(f64({4}));
  (a * b + add(a, b, 2.0)).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{5, 5, 5}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{6 + 6}));
}

TEST(ElementwiseGrad, NoHistoryWithoutRequiresGradOrUnderNoGrad) {
  Tensor a = f64({1, 2});
  EXPECT_FALSE((a * a).requires_grad());
  Tensor b = leaf(f64({1, 2}));
  NoGradGuard ng;
  EXPECT_FALSE((b * b).requires_grad());
  EXPECT_FALSE(lt(b, 1.0).requires_grad());
}

// ------------------------------------------------------------ in place

TEST(ElementwiseInplace, ValuesAndVersions) {
  Tensor a = f64({1, 2, 3, 4}).reshape({2, 2}).contiguous();
  const uint32_t v0 = a.version();
  a.add_(f64({10, 20}));
  EXPECT_EQ(vals(a), (std::vector<double>{11, 22, 13, 24}));
  EXPECT_GT(a.version(), v0);
  sub_(a, f64({1}), 2.0);
  EXPECT_EQ(vals(a), (std::vector<double>{9, 20, 11, 22}));
  a.mul_(f64({2, 3}).reshape({2, 1}));
  EXPECT_EQ(vals(a), (std::vector<double>{18, 40, 33, 66}));
  a.div_(f64({2, 4}));
  EXPECT_EQ(vals(a), (std::vector<double>{9, 10, 16.5, 16.5}));
  a.add_(1.0);
  a.mul_(2.0);
  EXPECT_EQ(vals(a), (std::vector<double>{20, 22, 35, 35}));
  Tensor i = tensor({1, 2}, {.dtype = DType::Int32});
  i.mul_(3.0);
  i.add_(tensor({1, 1}, {.dtype = DType::Int32}), 2.0);
  EXPECT_EQ(i.dtype(), DType::Int32);
  EXPECT_EQ(vals(i), (std::vector<double>{5, 8}));
  // A float32 tensor updated with a float64 operand stays float32.
  Tensor f = tensor({1, 2});
  f.add_(f64({0.5, 0.5}));
  EXPECT_EQ(f.dtype(), DType::Float32);
  EXPECT_EQ(vals(f), (std::vector<double>{1.5, 2.5}));
}

TEST(ElementwiseInplace, OverlappingOperandReadsOldValues) {
  Tensor a = f64({1, 2, 3, 4}).reshape({2, 2}).contiguous();
  Tensor expected = a + a.t();
  a.add_(a.t());
  EXPECT_EQ(vals(a), vals(expected));
  Tensor b = f64({1, 2, 3, 4, 5, 6}).reshape({2, 3}).contiguous();
  b.mul_(b.select(0, 0));  // the first row, broadcast over both rows
  EXPECT_EQ(vals(b), (std::vector<double>{1, 4, 9, 4, 10, 18}));
  Tensor c = f64({1, 2, 3});
  c.mul_(c);
  EXPECT_EQ(vals(c), (std::vector<double>{1, 4, 9}));
}

TEST(ElementwiseInplace, WritesThroughViews) {
  Tensor base = zeros({2, 3}, {.dtype = DType::Float64});
  Tensor row = base.select(0, 1);
  row.add_(f64({1, 2, 3}));
  Tensor col = base.select(1, 0);
  col.mul_(5.0);
  EXPECT_EQ(vals(base), (std::vector<double>{0, 0, 0, 5, 2, 3}));
}

TEST(ElementwiseInplace, GradientsKeepTheirInputsDType) {
  Tensor w = leaf(tensor({1, 2}));                             // float32
  Tensor b = leaf(tensor({3, 4}, {.dtype = DType::Float64}));  // float64
  Tensor a = w * 1.0;
  a.mul_(b);
  a.div_(b * 2.0);
  a.sum().backward();
  EXPECT_EQ(w.grad().dtype(), DType::Float32);
  EXPECT_EQ(b.grad().dtype(), DType::Float64);
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{0.5, 0.5}));
  for (double v : vals(b.grad())) EXPECT_NEAR(v, 0.0, 1e-6);  // a * b / (2b) does not depend on b
}

TEST(ElementwiseInplace, UnderNoGradOnALeafIsAllowed) {
  Tensor w = leaf(f64({1, 2}));
  {
    NoGradGuard ng;
    w.sub_(f64({0.5, 0.5}), 2.0);
  }
  EXPECT_EQ(vals(w), (std::vector<double>{0, 1}));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_TRUE(w.requires_grad());
}

TEST(ElementwiseInplace, MaskedFill) {
  Tensor a = f64({1, 2, 3, 4, 5, 6}).reshape({2, 3}).contiguous();
  Tensor mask = tensor({1, 0, 1}, {.dtype = DType::Bool});  // broadcast over rows
  masked_fill_(a, mask, -1.0);
  EXPECT_EQ(vals(a), (std::vector<double>{-1, 2, -1, -1, 5, -1}));
  Tensor i = tensor({1, 2}, {.dtype = DType::Int64});
  masked_fill_(i, tensor({0, 1}, {.dtype = DType::Bool}), 7.0);
  EXPECT_EQ(vals(i), (std::vector<double>{1, 7}));
  // Gradient: zero where filled.
  Tensor x = leaf(f64({1, 2, 3}));
  Tensor y = x * 2.0;
  masked_fill_(y, tensor({0, 1, 0}, {.dtype = DType::Bool}), 9.0);
  EXPECT_EQ(vals(y), (std::vector<double>{2, 9, 6}));
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 0, 2}));
}

TEST(ElementwiseInplace, ClampReluNegInPlace) {
  Tensor a = f64({-2, -0.5, 0, 0.5, 1, 3});
  clamp_(a, -1.0, 1.0);
  EXPECT_EQ(vals(a), (std::vector<double>{-1, -0.5, 0, 0.5, 1, 1}));
  relu_(a);
  EXPECT_EQ(vals(a), (std::vector<double>{0, 0, 0, 0.5, 1, 1}));
  neg_(a);
  EXPECT_EQ(vals(a), (std::vector<double>{-0.0, -0.0, -0.0, -0.5, -1, -1}));
  Tensor i = tensor({-5, 5}, {.dtype = DType::Int32});
  clamp_(i, std::nullopt, 2.0);
  EXPECT_EQ(vals(i), (std::vector<double>{-5, 2}));
  relu_(i);
  EXPECT_EQ(vals(i), (std::vector<double>{0, 2}));

  // Gradients: clamp_ passes where min <= x <= max (inclusive, judged on the input, which the
  // op overwrote); relu_ from its output.
  Tensor x = leaf(f64({-2, -1, 0, 1, 2}));
  Tensor y = x * 1.0;
  clamp_(y, -1.0, 1.0);
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 1, 1, 0}));
  Tensor x2 = leaf(f64({-2, 0, 2}));
  Tensor y2 = x2 * 1.0;
  relu_(y2).sum().backward();
  EXPECT_EQ(vals(x2.grad()), (std::vector<double>{0, 0, 1}));
}

// ------------------------------------------------------------ errors

TEST(ElementwiseErrors, ShapesThatDoNotBroadcast) {
  expect_error([] { add(zeros({2, 3}), zeros({4})); }, {"add", "[2, 3]", "[4]", "broadcast"});
  expect_error([] { mul(zeros({2}), zeros({3})); }, {"mul"});
  expect_error([] { maximum(zeros({2}), zeros({3})); }, {"maximum"});
  expect_error([] { where(zeros({2}, {.dtype = DType::Bool}), zeros({3}), zeros({3})); }, {"where"});
  expect_error([] { lt(zeros({2}), zeros({3})); }, {"lt"});
  expect_error([] { logical_and(zeros({2}), zeros({3})); }, {"logical_and"});
}

TEST(ElementwiseErrors, InplaceResultMustKeepTheShapeAndDType) {
  expect_error(
      [] {
        Tensor a = zeros({3});
        a.add_(zeros({2, 3}));
      },
      {"add_", "[2, 3]", "[3]"});
  expect_error(
      [] {
        Tensor a = zeros({3}, {.dtype = DType::Int32});
        a.add_(2.5);
      },
      {"add_", "float32", "int32"});
  expect_error(
      [] {
        Tensor a = zeros({3}, {.dtype = DType::Int32});
        a.div_(ones({3}, {.dtype = DType::Int32}));
      },
      {"div_", "float32"});
  expect_error(
      [] {
        Tensor a = zeros({3}, {.dtype = DType::Int32});
        a.add_(ones({3}, {.dtype = DType::Int32}), 0.5);
      },
      {"add_", "alpha"});
  expect_error(
      [] {
        Tensor a = zeros({3});
        masked_fill_(a, ones({2, 3}, {.dtype = DType::Bool}), 1.0);
      },
      {"masked_fill_", "[2, 3]"});
  expect_error(
      [] {
        Tensor a = zeros({3});
        masked_fill_(a, ones({3}), 1.0);
      },
      {"masked_fill_", "bool"});
  expect_error(
      [] {
        Tensor a = zeros({3}, {.dtype = DType::Int32});
        clamp_(a, 0.5, std::nullopt);
      },
      {"clamp_"});
}

TEST(ElementwiseErrors, InplaceIntoAnExpandedView) {
  Tensor e = zeros({3}).expand({2, 3});
  expect_error([&] { e.add_(ones({2, 3})); }, {"add_", "share memory"});
  expect_error([&] { relu_(e); }, {"relu_", "share memory"});
  expect_error([&] { neg_(e); }, {"neg_", "share memory"});
  expect_error([&] { clamp_(e, 0.0, 1.0); }, {"clamp_", "share memory"});
  expect_error([&] { masked_fill_(e, ones({2, 3}, {.dtype = DType::Bool}), 1.0); }, {"masked_fill_", "share memory"});
  Tensor one = zeros({1}).expand({1, 1});  // size-1 expanded dims are fine
  one.add_(1.0);
  EXPECT_EQ(vals(one), (std::vector<double>{1}));
}

TEST(ElementwiseErrors, InplaceOnALeafThatRequiresGrad) {
  Tensor w = leaf(f64({1, 2}));
  expect_error([&] { w.add_(1.0); }, {"add_", "leaf"});
  expect_error([&] { w.mul_(f64({2, 2})); }, {"mul_", "leaf"});
  expect_error([&] { relu_(w); }, {"relu_", "leaf"});
  expect_error([&] { clamp_(w, 0.0, 1.0); }, {"clamp_", "leaf"});
  expect_error([&] { neg_(w); }, {"neg_", "leaf"});
  expect_error([&] { masked_fill_(w, tensor({1, 0}, {.dtype = DType::Bool}), 0.0); }, {"masked_fill_", "leaf"});
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2}));  // refused before writing
}

TEST(ElementwiseErrors, InplaceOnAViewUnderAutograd) {
  Tensor w = leaf(f64({1, 2, 3, 4}));
  Tensor x = w * 1.0;
  Tensor v = x.slice(0, 0, 2);
  expect_error([&] { v.mul_(2.0); }, {"mul_", "view"});
  expect_error([&] { relu_(v); }, {"relu_", "view"});
}

TEST(ElementwiseErrors, ModifyingASavedTensorFailsAtBackward) {
  {
    Tensor w = leaf(f64({1, 2}));
    Tensor y = exp(w);  // saves its output
    y.add_(1.0);
    expect_error([&] { y.sum().backward(); }, {"modified by an in-place operation"});
  }
  {
    Tensor w = leaf(f64({1, 2})), b = leaf(f64({3, 4}));
    Tensor a = w * 1.0;
    Tensor z = a * b;  // saves a for b's gradient
    a.mul_(2.0);
    expect_error([&] { z.sum().backward(); }, {"modified by an in-place operation"});
  }
  {
    // Saved by the in-place op itself: relu_ keeps its output, then it is changed again.
    Tensor w = leaf(f64({-1, 2}));
    Tensor a = w * 1.0;
    relu_(a);
    Tensor s = sigmoid(a);
    a.add_(1.0);
    expect_error([&] { (s + a).sum().backward(); }, {"modified by an in-place operation"});
  }
}

TEST(ElementwiseErrors, UnsupportedDTypesAndArguments) {
  Tensor b = tensor({1, 0}, {.dtype = DType::Bool});
  expect_error([&] { add(b, b); }, {"add", "bool"});
  expect_error([&] { neg(b); }, {"neg", "bool"});
  Tensor h = tensor({1, 2}, {.dtype = DType::Float16});
  expect_error([&] { exp(h); }, {"exp", "float16"});
  // Binary arithmetic on the 16-bit storage types runs in float32 and rounds back (autograd sums
  // 16-bit gradients with it under autocast).
  Tensor hh = mul(h, h);
  EXPECT_EQ(hh.dtype(), DType::Float16);
  EXPECT_EQ(vals(hh), (std::vector<double>{1, 4}));
  EXPECT_EQ(vals(add(h.to(DType::BFloat16), h.to(DType::BFloat16), 0.5)), (std::vector<double>{1.5, 3}));
  expect_error([&] { where(ones({2}), ones({2}), ones({2})); }, {"where", "bool"});
  expect_error([] { pow(tensor({2}, {.dtype = DType::Int32}), -1.0); }, {"pow", "negative"});
  expect_error([] { add(tensor({2}, {.dtype = DType::Int32}), tensor({2}, {.dtype = DType::Int32}), 0.5); },
               {"add", "alpha"});
  expect_error([] { add(Tensor(), ones({2})); }, {"add", "undefined"});
}

TEST(ElementwiseErrors, DeviceMismatch) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "needs a CUDA device";
  Tensor a = ones({2}), b = ones({2}).to(Device::cuda());
  expect_error([&] { add(a, b); }, {"add", "different devices"});
  expect_error([&] { a.add_(b); }, {"add_", "different devices"});
}
