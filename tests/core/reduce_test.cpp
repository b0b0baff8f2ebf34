// Reductions: hand-computed values (integer and bool promotion, float32 accumulated in double,
// empty and 0-dim inputs, ties and NaN giving the first index even across the chunks threads take,
// the even split of a tied maximum's gradient, the inf-norm's ties, one and two zeros in a product),
// the result's shape for every dim set, and every argument error. Values against compositions of
// other ops for every dim set, keepdim and view, the threaded split paths, float32 variance far
// from zero and the finite differences are op-table rows (tests/ops/op_rows_reduce.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/ops.h"
#include "core/parallel.h"
#include "test_helpers.h"

using namespace ember;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
using Values = std::vector<double>;

void expect_values(const Tensor& t, const Values& ref, double rtol = 1e-6, double atol = 1e-6) {
  const Values got = t.to_vector<double>();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": got " << got[i] << ", want nan";
    } else if (std::isinf(ref[i])) {
      EXPECT_EQ(got[i], ref[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], ref[i], atol + rtol * std::abs(ref[i])) << "at " << i;
    }
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

Tensor randn64(Shape s, uint64_t seed) {
  Generator g(seed);
  return randn(std::move(s), {.dtype = DType::Float64}, &g);
}

Tensor leaf(const Tensor& t) {
  return t.detach().requires_grad_();
}

// Runs a scope with 4 threads, so the split paths run whatever the machine's core count.
struct FourThreads : test_util::ScopedThreads {
  FourThreads() : ScopedThreads(4) {}
};

// Every dim set of a 3-D tensor worth checking, with negative spellings.
const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, -1}, {2, 0, 1}};

}  // namespace

// ------------------------------------------------------------------ sum / mean

TEST(Reduce, SumShapeAndDTypeForEveryDimSet) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor a = zeros({3, 4, 5}, {.dtype = dt});
    for (const auto& dims : kDimSets)
      for (bool keepdim : {false, true}) {
        Tensor s = sum(a, dims, keepdim);
        EXPECT_EQ(s.dtype(), dt);
        Shape want;
        for (int64_t d = 0; d < 3; ++d) {
          bool r = dims.empty();
          for (int64_t x : dims) r |= (x < 0 ? x + 3 : x) == d;
          if (!r)
            want.push_back(a.size(d));
          else if (keepdim)
            want.push_back(1);
        }
        EXPECT_EQ(s.shape(), want);
      }
  }
}

TEST(Reduce, SumPromotesIntegersAndBoolToInt64) {
  Tensor i = from_vector<int32_t>({1, -2, 3, 4, 5, 6}, {2, 3});
  Tensor si = sum(i, {1});
  EXPECT_EQ(si.dtype(), DType::Int64);
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{2, 15}));
  Tensor u = from_vector<uint8_t>({200, 100, 250}, {3});
  EXPECT_EQ(sum(u).item<int64_t>(), 550);  // no uint8 wrap-around
  Tensor b = from_vector<uint8_t>({1, 0, 1, 1}, {2, 2}).to(DType::Bool);
  EXPECT_EQ(sum(b).dtype(), DType::Int64);
  EXPECT_EQ(sum(b).item<int64_t>(), 3);
  EXPECT_EQ(sum(b, {0}).to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
}

TEST(Reduce, SumAccumulatesFloat32InDouble) {
  // Float accumulation would stop at 2^24; the extra 1000 ones must count.
  const int64_t n = (int64_t{1} << 24) + 1000;
  EXPECT_EQ(ones({n}).sum().item(), static_cast<double>(n));
  EXPECT_EQ(ones({n / 8, 8}).sum({0}).to_vector<float>(), std::vector<float>(8, static_cast<float>(n / 8)));
  // 0.1f is not exact: the result must match the double sum of the same float values.
  Tensor t = full({3000000}, 0.1);
  const double want = 3000000.0 * static_cast<double>(0.1f);
  EXPECT_NEAR(t.sum().item(), want, want * 1e-7);
  EXPECT_NEAR(t.view({1000, 3000}).sum({0}).sum().item(), want, want * 1e-7);
  EXPECT_NEAR(t.view({3000, 1000}).t().sum({1}).sum().item(), want, want * 1e-7);
}

TEST(Reduce, SumToKeepsAnEqualShapeAndRejectsOthers) {
  Tensor h = randn64({4, 5, 6}, 4);
  EXPECT_TRUE(sum_to(h, {4, 5, 6}).is_same(h));
  EXPECT_EQ(sum_to(h, {5, 1}).shape(), (Shape{5, 1}));
  expect_error([&] { sum_to(h, {3, 6}); }, "sum_to");
  expect_error([&] { sum_to(randn64({257, 33}, 3), {2, 257, 33}); }, "sum_to");
}

TEST(Reduce, SumOfEmptyIsZeroAndMeanOfEmptyIsNan) {
  Tensor e = zeros({0, 3});
  EXPECT_EQ(sum(e).item(), 0.0);
  EXPECT_EQ(sum(e, {0}).to_vector<float>(), std::vector<float>(3, 0.0f));
  EXPECT_EQ(sum(e, {1}).shape(), (Shape{0}));
  EXPECT_TRUE(std::isnan(mean(e).item()));
  Tensor m = mean(e, {0});
  EXPECT_EQ(m.shape(), (Shape{3}));
  for (float v : m.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(prod(e, 0).to_vector<float>(), std::vector<float>(3, 1.0f));
  EXPECT_EQ(norm(e).item(), 0.0);
  EXPECT_EQ(norm(e, kInf).item(), 0.0);
  EXPECT_EQ(norm(e, 3.0, {0}).to_vector<float>(), std::vector<float>(3, 0.0f));
}

TEST(Reduce, ZeroDimTensors) {
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(sum(s).item(), 2.5);
  EXPECT_EQ(sum(s, {0}).shape(), Shape{});
  EXPECT_EQ(sum(s, {-1}, true).item(), 2.5);
  EXPECT_EQ(mean(s).item(), 2.5);
  EXPECT_EQ(max(s).item(), 2.5);
  EXPECT_EQ(argmax(s).item(), 0.0);
  auto [v, i] = max(s, 0);
  EXPECT_EQ(v.item(), 2.5);
  EXPECT_EQ(i.item(), 0.0);
  EXPECT_EQ(prod(s, 0).item(), 2.5);
}

TEST(Reduce, MeanOfIntegersIsRejected) {
  expect_error([] { mean(from_vector<int64_t>({1, 2}, {2})); }, "mean");
}

// ------------------------------------------------------------------ prod

TEST(Reduce, ProdOfIntegersAndShapes) {
  Tensor i = from_vector<int32_t>({2, -3, 4, 5}, {2, 2});
  Tensor pi = prod(i, 1);
  EXPECT_EQ(pi.dtype(), DType::Int64);
  EXPECT_EQ(pi.to_vector<int64_t>(), (std::vector<int64_t>{-6, 20}));
  Tensor a = zeros({3, 4, 5}, {.dtype = DType::Float64});
  EXPECT_EQ(prod(a.transpose(0, 1), 0).shape(), (Shape{3, 5}));
  EXPECT_EQ(prod(a, 1, true).shape(), (Shape{3, 1, 5}));
}

TEST(Reduce, ProdGradientWithZeros) {
  // One zero in a slice: only the zero gets a gradient (the product of the others). Two zeros:
  // nothing does.
  Tensor z = leaf(from_vector<double>({2, 0, 3, 0, 5, 0}, {2, 3}));
  prod(z, 1).sum().backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (Values{0, 6, 0, 0, 0, 0}));
}

// ------------------------------------------------------------------ max / min

TEST(Reduce, MaxMinOfAllElements) {
  Tensor a = from_vector<double>({3, -1, 7, 7, -9, 2}, {2, 3});
  EXPECT_EQ(max(a).item(), 7.0);
  EXPECT_EQ(min(a).item(), -9.0);
  EXPECT_EQ(a.max().item(), 7.0);
  EXPECT_EQ(a.min().item(), -9.0);
  EXPECT_EQ(max(a).dim(), 0);
  Tensor i = from_vector<int32_t>({3, -1, 7}, {3});
  EXPECT_EQ(max(i).dtype(), DType::Int32);
  EXPECT_EQ(min(i).item(), -1.0);
  Tensor n = from_vector<double>({1, kNaN, 3}, {3});
  EXPECT_TRUE(std::isnan(max(n).item()));
  EXPECT_TRUE(std::isnan(min(n).item()));
  Tensor b = from_vector<uint8_t>({0, 1}, {2}).to(DType::Bool);
  EXPECT_EQ(max(b).dtype(), DType::Bool);
  EXPECT_EQ(max(b).item(), 1.0);
  EXPECT_EQ(min(b).item(), 0.0);
  expect_error([] { max(zeros({0})); }, "max");
  expect_error([] { min(zeros({2, 0})); }, "min");
}

TEST(Reduce, TiesGiveTheFirstIndex) {
  Tensor a = from_vector<double>({1, 5, 5, 2, 3, 3, 3, 0}, {2, 4});
  auto [v, i] = max(a, 1);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  auto [vm, im] = min(a, 1);
  EXPECT_EQ(im.to_vector<int64_t>(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(argmax(a).item(), 1.0);
  EXPECT_EQ(argmax(a, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(argmin(a, 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1}));
  // All -inf: the first element, not an index left over from the initial value.
  Tensor ninf = full({3, 70001}, -kInf, {.dtype = DType::Float64});
  EXPECT_EQ(argmax(ninf, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(argmax(ninf.t(), 0).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 0}));
  // Ties across the chunks that threads take: the earliest wins, in rows and in columns.
  FourThreads threads;
  Tensor big = zeros({2, 100000}, {.dtype = DType::Float64});
  big.select(0, 0).slice(0, 70000, 70001).fill_(4);
  big.select(0, 0).slice(0, 90000, 90001).fill_(4);
  big.select(0, 1).slice(0, 99999, 100000).fill_(-1);
  EXPECT_EQ(argmax(big, 1).to_vector<int64_t>(), (std::vector<int64_t>{70000, 0}));
  EXPECT_EQ(argmin(big, 1).to_vector<int64_t>(), (std::vector<int64_t>{0, 99999}));
  EXPECT_EQ(argmax(big.select(0, 0)).item(), 70000.0);
  EXPECT_EQ(argmax(big).item(), 70000.0);
  EXPECT_EQ(argmin(big).item(), 199999.0);
  Tensor bigc = big.t().contiguous();  // [100000, 2]: reduce dim 0 as columns
  EXPECT_EQ(argmax(bigc, 0).to_vector<int64_t>(), (std::vector<int64_t>{70000, 0}));
  // The flat order of a transposed view: two groups of reduced dims, split across threads.
  Tensor tall = zeros({100000, 2}, {.dtype = DType::Float64});
  tall.select(1, 1).slice(0, 70000, 70001).fill_(5);
  tall.select(1, 1).slice(0, 90000, 90001).fill_(5);
  EXPECT_EQ(argmax(tall.t()).item(), 170000.0);
  tall.select(1, 0).slice(0, 10, 11).fill_(5);
  EXPECT_EQ(argmax(tall.t()).item(), 10.0);
  EXPECT_EQ(argmax(tall).item(), 20.0);
  Tensor wide = zeros({60000, 16}, {.dtype = DType::Float64});
  wide.select(1, 3).slice(0, 40000, 40001).fill_(2);
  wide.select(1, 3).slice(0, 50000, 50001).fill_(2);
  Tensor wi = argmax(wide, 0);
  std::vector<int64_t> want(16, 0);
  want[3] = 40000;
  EXPECT_EQ(wi.to_vector<int64_t>(), want);
}

TEST(Reduce, NanIsTheExtremeAndItsFirstIndexWins) {
  Tensor a = from_vector<double>({1, kNaN, 9, kNaN, 2, 3}, {2, 3});
  auto [v, i] = max(a, 1);
  EXPECT_TRUE(std::isnan(v.to_vector<double>()[0]));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmin(a, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(argmax(a).item(), 1.0);
  Tensor an = amax(a, {0});
  Values av = an.to_vector<double>();
  EXPECT_TRUE(std::isnan(av[0]) && std::isnan(av[1]));
  EXPECT_EQ(av[2], 9.0);
  Tensor big = randn64({100, 64}, 12);
  big.select(0, 77).slice(0, 5, 6).fill_(kNaN);
  Values bv = amax(big, {0}).to_vector<double>();
  EXPECT_TRUE(std::isnan(bv[5]));
  EXPECT_FALSE(std::isnan(bv[4]));
  EXPECT_TRUE(std::isnan(amax(big.flatten()).item()));
  EXPECT_EQ(argmax(big.flatten()).item(), 77.0 * 64 + 5);
}

TEST(Reduce, MaxAlongDimGradientFlowsToTheFirstIndex) {
  Tensor x = leaf(from_vector<double>({1, 4, 4, 0, 2, 2}, {2, 3}));
  auto [v, i] = max(x, 1);
  (v * from_vector<double>({10, 20}, {2})).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (Values{0, 10, 0, 0, 20, 0}));
  Tensor y = leaf(from_vector<double>({3, 1, 1, 5}, {2, 2}));
  min(y, 0, true).first.sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (Values{0, 1, 1, 0}));
}

TEST(Reduce, AmaxAminOfIntegersAndEmpty) {
  Tensor i = from_vector<int64_t>({5, -7, 3, 9}, {2, 2});
  EXPECT_EQ(amax(i, {1}).to_vector<int64_t>(), (std::vector<int64_t>{5, 9}));
  EXPECT_EQ(amin(i, {0}).to_vector<int64_t>(), (std::vector<int64_t>{3, -7}));
  EXPECT_EQ(amax(zeros({0, 3}), {1}).shape(), (Shape{0}));
  expect_error([] { amax(zeros({0, 3}), {0}); }, "amax");
}

TEST(Reduce, AmaxGradientIsSharedEvenlyAmongTies) {
  Tensor x = leaf(from_vector<double>({2, 7, 7, 7, 1, 3, 0, 0}, {2, 4}));
  amax(x, {1}).sum().backward();
  const double third = 1.0 / 3.0;
  expect_values(x.grad(), {0, third, third, third, 0, 1, 0, 0}, 1e-15, 1e-15);
  Tensor y = leaf(from_vector<double>({4, 4, -1, 4}, {4}));
  max(y).backward();
  expect_values(y.grad(), {third, third, 0, third}, 1e-15, 1e-15);
  Tensor z = leaf(from_vector<double>({-2, 5, -2, 8}, {2, 2}));
  amin(z, {0, 1}).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (Values{0.5, 0, 0.5, 0}));
}

TEST(Reduce, ArgmaxArgminShapesAndIntegers) {
  Tensor a = zeros({4, 6, 3}, {.dtype = DType::Float64});
  EXPECT_EQ(argmax(a).dtype(), DType::Int64);
  EXPECT_EQ(argmax(a).dim(), 0);
  for (int64_t d : {0, 1, 2, -1})
    for (bool keepdim : {false, true}) EXPECT_EQ(argmax(a, d, keepdim).dim(), keepdim ? 3 : 2);
  Tensor u = from_vector<uint8_t>({3, 9, 9, 1}, {4});
  EXPECT_EQ(argmax(u).item(), 1.0);
  EXPECT_EQ(argmin(u).item(), 3.0);
  EXPECT_EQ(argmax(zeros({0, 4}), 1).shape(), (Shape{0}));
  expect_error([] { argmax(zeros({0})); }, "argmax");
  expect_error([] { argmin(zeros({3, 0}), 1); }, "argmin");
  expect_error([] { argmax(zeros({3, 0}), 2); }, "argmax");
}

// ------------------------------------------------------------------ var / std

TEST(Reduce, VarOfTooFewElementsIsNan) {
  EXPECT_TRUE(std::isnan(var(ones({1})).item()));
  EXPECT_EQ(var(ones({1}), {}, false).item(), 0.0);
  EXPECT_TRUE(std::isnan(ember::std(zeros({0})).item()));
  EXPECT_TRUE(std::isnan(var(zeros({0, 2}), {0}).to_vector<float>()[1]));
  expect_error([] { var(from_vector<int32_t>({1, 2}, {2})); }, "var");
}

// ------------------------------------------------------------------ logsumexp / norm

TEST(Reduce, LogsumexpIsStable) {
  Tensor big = from_vector<double>({1000, 1000, -1000, 0}, {2, 2});
  expect_values(logsumexp(big, {1}), {1000 + std::log(2.0), 0}, 1e-15, 1e-12);
  Tensor bigf = tensor({1000, 999, -1000});
  EXPECT_NEAR(logsumexp(bigf, {0}).item(), 1000 + std::log1p(std::exp(-1.0)), 1e-3);
  Tensor ninf = from_vector<double>({-kInf, -kInf, 1, -kInf}, {2, 2});
  EXPECT_EQ(logsumexp(ninf, {1}).to_vector<double>(), (Values{-kInf, 1}));
  EXPECT_EQ(logsumexp(zeros({2, 0}), {1}).to_vector<float>(), std::vector<float>(2, -INFINITY));
  Tensor li = logsumexp(from_vector<int64_t>({0, 0}, {2}), {0});
  EXPECT_EQ(li.dtype(), DType::Float32);
  EXPECT_NEAR(li.item(), std::log(2.0), 1e-6);
}

TEST(Reduce, NormHandValuesAndErrors) {
  expect_values(norm(tensor({3, -4})), {5});
  Tensor a = randn64({3, 4, 5}, 23);
  expect_error([&] { norm(a, 0.0); }, "norm");
  expect_error([&] { norm(a, -1.0); }, "norm");
  expect_error([] { norm(from_vector<int32_t>({1}, {1})); }, "norm");
}

TEST(Reduce, NormGradientAtTiesAndAtZero) {
  // Ties in |x| for the inf-norm share the gradient, with the sign of each element.
  Tensor t = leaf(from_vector<double>({-3, 3, 1}, {3}));
  norm(t, kInf).backward();
  EXPECT_EQ(t.grad().to_vector<double>(), (Values{-0.5, 0.5, 0}));
  Tensor z = leaf(zeros({3}, {.dtype = DType::Float64}));
  norm(z).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (Values{0, 0, 0}));
}

// ------------------------------------------------------------------ errors

TEST(Reduce, DimErrorsNameTheOp) {
  Tensor a = zeros({2, 3});
  expect_error([&] { sum(a, {2}); }, "sum");
  expect_error([&] { sum(a, {-3}); }, "sum");
  expect_error([&] { mean(a, {0, 0}); }, "mean");
  expect_error([&] { sum(a, {1, -1}); }, "appears more than once");
  expect_error([&] { prod(a, 5); }, "prod");
  expect_error([&] { max(a, 2); }, "max");
  expect_error([&] { min(a, -4); }, "min");
  expect_error([&] { amax(a, {0, -2}); }, "amax");
  expect_error([&] { argmax(a, 3); }, "argmax");
  expect_error([&] { var(a, {7}); }, "var");
  expect_error([&] { ember::std(a, {0, 0}); }, "std");
  expect_error([&] { logsumexp(a, {9}); }, "logsumexp");
  expect_error([&] { norm(a, 2, {4}); }, "norm");
  expect_error([&] { sum(Tensor()); }, "sum");
  expect_error([&] { sum(zeros({2}, {.dtype = DType::Float16})); }, "sum");
}

// argmax/argmin of 16-bit values (autocast's logits under --precision bf16/fp16): the float32
// answer, ties to the first as always.
TEST(Reduce, ArgExtremesOf16BitValues) {
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    Tensor a = tensor({{1, 5, 5, -2}, {3, -7, 0.5, 9}}).to(dt);
    EXPECT_EQ(argmax(a, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(argmin(a, 1).to_vector<int64_t>(), (std::vector<int64_t>{3, 1}));
    EXPECT_EQ(argmax(a).item<int64_t>(), 7);
  }
}
