// Reductions: values against float64 loop references, keepdim, negative and multiple dims,
// non-contiguous inputs, empty tensors, the threaded split paths, errors, and gradcheck.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/autograd/gradcheck.h"
#include "core/ops.h"
#include "core/parallel.h"

using namespace ember;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
using Values = std::vector<double>;

// Reduces a row-major copy of `a` over `dims` (empty = all) with f applied to each output's
// values, taken in row-major order.
Values ref_reduce(const Tensor& a, std::vector<int64_t> dims, const std::function<double(const Values&)>& f) {
  const Shape& s = a.shape();
  const int64_t nd = a.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  std::vector<int64_t> ostride(static_cast<size_t>(nd), 0);
  int64_t O = 1;
  for (int64_t d = nd - 1; d >= 0; --d)
    if (!red[d]) {
      ostride[d] = O;
      O *= s[d];
    }
  std::vector<Values> groups(static_cast<size_t>(O));
  const Values v = a.to_vector<double>();
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t o = 0;
    for (int64_t d = 0; d < nd; ++d) o += idx[d] * ostride[d];
    groups[o].push_back(v[i]);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
  Values r;
  for (const Values& g : groups) r.push_back(f(g));
  return r;
}

double ref_sum(const Values& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double ref_mean(const Values& v) {
  return ref_sum(v) / static_cast<double>(v.size());
}
double ref_var(const Values& v, double correction) {
  const double m = ref_mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / std::max(0.0, static_cast<double>(v.size()) - correction);
}

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

void expect_gradcheck(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  auto r = gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
  EXPECT_TRUE(r.ok) << r.message;
}

// Runs a scope with 4 threads, so the split paths run whatever the machine's core count.
class FourThreads {
 public:
  FourThreads() : prev_(get_num_threads()) { set_num_threads(4); }
  ~FourThreads() { set_num_threads(prev_); }

 private:
  int prev_;
};

// Every dim set of a 3-D tensor worth checking, with negative spellings.
const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, -1}, {2, 0, 1}};

}  // namespace

// ------------------------------------------------------------------ sum / mean

TEST(Reduce, SumMatchesReferenceForEveryDimSet) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator g(1);
    Tensor a = randn({3, 4, 5}, {.dtype = dt}, &g);
    for (const auto& dims : kDimSets)
      for (bool keepdim : {false, true}) {
        Tensor s = sum(a, dims, keepdim);
        EXPECT_EQ(s.dtype(), dt);
        Values ref = ref_reduce(a, dims, ref_sum);
        expect_values(s, ref, 1e-5, 1e-5);
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

TEST(Reduce, SumOfNonContiguousInputs) {
  Tensor base = randn64({6, 8, 4}, 2);
  std::vector<Tensor> views = {base.transpose(0, 2), base.permute({1, 2, 0}), base.slice(1, 1, 7, 2),
                               base.select(2, 1).unsqueeze(1).expand({6, 5, 8}), base.slice(2, 0, 4, 3)};
  for (const Tensor& v : views)
    for (const auto& dims : kDimSets) expect_values(sum(v, dims), ref_reduce(v, dims, ref_sum), 1e-12, 1e-12);
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

TEST(Reduce, SumOverLeadingDimsIsAColumnSum) {
  // [N, C] -> [C]: the bias-gradient shape, through sum_to.
  Tensor g = randn64({257, 33}, 3);
  expect_values(sum_to(g, {33}), ref_reduce(g, {0}, ref_sum), 1e-12, 1e-12);
  expect_values(sum_to(g, {1, 33}), ref_reduce(g, {0}, ref_sum), 1e-12, 1e-12);
  Tensor h = randn64({4, 5, 6}, 4);
  Tensor st = sum_to(h, {5, 1});
  EXPECT_EQ(st.shape(), (Shape{5, 1}));
  expect_values(st, ref_reduce(h, {0, 2}, ref_sum), 1e-12, 1e-12);
  EXPECT_TRUE(sum_to(h, {4, 5, 6}).is_same(h));
  expect_error([&] { sum_to(h, {3, 6}); }, "sum_to");
  expect_error([&] { sum_to(g, {2, 257, 33}); }, "sum_to");
}

TEST(Reduce, ThreadedSplitPathsMatchReference) {
  // Few outputs with long reductions (the rows are split across threads), and few column
  // blocks with many rows (the rows of each block are split).
  FourThreads threads;
  Tensor rows = randn64({2, 100003}, 5);
  expect_values(sum(rows, {1}), ref_reduce(rows, {1}, ref_sum), 1e-10, 1e-9);
  expect_values(sum(rows), ref_reduce(rows, {}, ref_sum), 1e-10, 1e-9);
  Tensor cols = randn64({50001, 9}, 6);
  expect_values(sum(cols, {0}), ref_reduce(cols, {0}, ref_sum), 1e-10, 1e-9);
  expect_values(var(cols, {0}), ref_reduce(cols, {0}, [](const Values& v) { return ref_var(v, 1); }), 1e-9, 1e-12);
  expect_values(var(rows, {1}), ref_reduce(rows, {1}, [](const Values& v) { return ref_var(v, 1); }), 1e-9, 1e-12);
  expect_values(amax(cols, {0}),
                ref_reduce(cols, {0}, [](const Values& v) { return *std::max_element(v.begin(), v.end()); }));
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

TEST(Reduce, MeanMatchesReference) {
  Tensor a = randn64({4, 3, 5}, 7);
  for (const auto& dims : kDimSets)
    for (bool keepdim : {false, true})
      expect_values(mean(a, dims, keepdim), ref_reduce(a, dims, ref_mean), 1e-12, 1e-12);
  expect_values(mean(a.transpose(0, 1), {0}), ref_reduce(a.transpose(0, 1), {0}, ref_mean), 1e-12, 1e-12);
  expect_error([] { mean(from_vector<int64_t>({1, 2}, {2})); }, "mean");
}

TEST(Reduce, SumAndMeanGradcheck) {
  Tensor x = leaf(randn64({3, 4, 2}, 8));
  for (const auto& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      expect_gradcheck([&](const Tensor& t) { return sum(t, dims, keepdim); }, x);
      expect_gradcheck([&](const Tensor& t) { return mean(t, dims, keepdim); }, x);
    }
  expect_gradcheck([](const Tensor& t) { return sum(t.transpose(0, 2), {1}); }, x);
  expect_gradcheck([](const Tensor& t) { return mean(t.slice(1, 0, 4, 2), {0, 2}); }, x);
  expect_gradcheck([](const Tensor& t) { return sum_to(t, {4, 1}); }, x);
}

// ------------------------------------------------------------------ prod

TEST(Reduce, ProdValuesAndDtypes) {
  Tensor a = randn64({3, 4, 5}, 9);
  for (int64_t d : {0, 1, 2, -1})
    for (bool keepdim : {false, true}) {
      Tensor p = prod(a, d, keepdim);
      expect_values(p,
                    ref_reduce(a, {d},
                               [](const Values& v) {
                                 double r = 1;
                                 for (double x : v) r *= x;
                                 return r;
                               }),
                    1e-12, 1e-14);
      EXPECT_EQ(p.dim(), keepdim ? 3 : 2);
    }
  Tensor i = from_vector<int32_t>({2, -3, 4, 5}, {2, 2});
  Tensor pi = prod(i, 1);
  EXPECT_EQ(pi.dtype(), DType::Int64);
  EXPECT_EQ(pi.to_vector<int64_t>(), (std::vector<int64_t>{-6, 20}));
  EXPECT_EQ(prod(a.transpose(0, 1), 0).shape(), (Shape{3, 5}));
  expect_values(prod(a.permute({2, 0, 1}), 2),
                ref_reduce(a.permute({2, 0, 1}), {2},
                           [](const Values& v) {
                             double r = 1;
                             for (double x : v) r *= x;
                             return r;
                           }),
                1e-12, 1e-14);
}

TEST(Reduce, ProdGradcheckIncludingZeros) {
  Tensor x = leaf(randn64({3, 4, 2}, 10));
  for (int64_t d : {0, 1, 2})
    for (bool keepdim : {false, true}) expect_gradcheck([&](const Tensor& t) { return prod(t, d, keepdim); }, x);
  // One zero in a slice: only the zero gets a gradient (the product of the others). Two zeros:
  // nothing does.
  Tensor z = leaf(from_vector<double>({2, 0, 3, 0, 5, 0}, {2, 3}));
  prod(z, 1).sum().backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (Values{0, 6, 0, 0, 0, 0}));
  Tensor z2 = leaf(from_vector<double>({2, 0, 3, 4, 5, 6}, {2, 3}));
  expect_gradcheck([](const Tensor& t) { return prod(t, 1); }, z2);
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

TEST(Reduce, MaxMinAlongDimWithIndices) {
  Tensor a = randn64({4, 5, 6}, 11);
  for (int64_t d : {0, 1, 2, -2})
    for (bool keepdim : {false, true}) {
      auto [v, i] = max(a, d, keepdim);
      auto [vn, in] = min(a, d, keepdim);
      EXPECT_EQ(i.dtype(), DType::Int64);
      EXPECT_EQ(v.shape(), i.shape());
      expect_values(v, ref_reduce(a, {d}, [](const Values& x) { return *std::max_element(x.begin(), x.end()); }));
      expect_values(vn, ref_reduce(a, {d}, [](const Values& x) { return *std::min_element(x.begin(), x.end()); }));
      expect_values(i, ref_reduce(a, {d}, [](const Values& x) {
                      return static_cast<double>(std::max_element(x.begin(), x.end()) - x.begin());
                    }));
      expect_values(in, ref_reduce(a, {d}, [](const Values& x) {
                      return static_cast<double>(std::min_element(x.begin(), x.end()) - x.begin());
                    }));
    }
  // Non-contiguous: max along dim 0 of a transpose reads strided columns.
  Tensor t = a.select(2, 3).t();  // [5, 4]
  auto [tv, ti] = max(t, 1);
  expect_values(ti, ref_reduce(t, {1}, [](const Values& x) {
                  return static_cast<double>(std::max_element(x.begin(), x.end()) - x.begin());
                }));
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

TEST(Reduce, MaxMinAlongDimGradcheck) {
  Tensor x = leaf(randn64({3, 4, 5}, 13));
  for (int64_t d : {0, 1, -1})
    for (bool keepdim : {false, true}) {
      expect_gradcheck([&](const Tensor& t) { return max(t, d, keepdim).first; }, x);
      expect_gradcheck([&](const Tensor& t) { return min(t, d, keepdim).first; }, x);
    }
  expect_gradcheck([](const Tensor& t) { return max(t.transpose(0, 2), 1).first; }, x);
}

TEST(Reduce, AmaxAminValues) {
  Tensor a = randn64({3, 4, 5}, 14);
  for (const auto& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      expect_values(amax(a, dims, keepdim),
                    ref_reduce(a, dims, [](const Values& x) { return *std::max_element(x.begin(), x.end()); }));
      expect_values(amin(a, dims, keepdim),
                    ref_reduce(a, dims, [](const Values& x) { return *std::min_element(x.begin(), x.end()); }));
    }
  Tensor p = a.permute({2, 0, 1});
  expect_values(amax(p, {0, 2}),
                ref_reduce(p, {0, 2}, [](const Values& x) { return *std::max_element(x.begin(), x.end()); }));
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

TEST(Reduce, AmaxAminGradcheck) {
  Tensor x = leaf(randn64({3, 4, 5}, 15));
  for (const auto& dims : kDimSets)
    for (bool keepdim : {false, true}) {
      expect_gradcheck([&](const Tensor& t) { return amax(t, dims, keepdim); }, x);
      expect_gradcheck([&](const Tensor& t) { return amin(t, dims, keepdim); }, x);
    }
  expect_gradcheck([](const Tensor& t) { return max(t); }, x);
  expect_gradcheck([](const Tensor& t) { return min(t.t()); }, leaf(randn64({3, 4}, 16)));
  // Two-way ties: central differences see half the slope on each, which is the even split.
  Tensor ties = leaf(from_vector<double>({1, 3, 3, 0, -2, -2}, {2, 3}));
  expect_gradcheck([](const Tensor& t) { return amax(t, {1}); }, ties);
  expect_gradcheck([](const Tensor& t) { return amin(t, {1}); }, ties);
  expect_gradcheck([](const Tensor& t) { return max(t); }, ties);
}

TEST(Reduce, ArgmaxArgminFlatAndPerDim) {
  Tensor a = randn64({4, 6, 3}, 17);
  auto flat_ref = [](const Values& x) { return static_cast<double>(std::max_element(x.begin(), x.end()) - x.begin()); };
  EXPECT_EQ(argmax(a).item(), ref_reduce(a, {}, flat_ref)[0]);
  EXPECT_EQ(argmax(a).dtype(), DType::Int64);
  EXPECT_EQ(argmax(a).dim(), 0);
  EXPECT_EQ(argmin(a).item(), ref_reduce(a, {}, [](const Values& x) {
              return static_cast<double>(std::min_element(x.begin(), x.end()) - x.begin());
            })[0]);
  Tensor t = a.transpose(0, 1);  // flat index follows the view's row-major order
  EXPECT_EQ(argmax(t).item(), ref_reduce(t, {}, flat_ref)[0]);
  for (int64_t d : {0, 1, 2, -1})
    for (bool keepdim : {false, true}) {
      Tensor i = argmax(a, d, keepdim);
      EXPECT_EQ(i.dim(), keepdim ? 3 : 2);
      expect_values(i, ref_reduce(a, {d}, flat_ref));
      expect_values(a.argmax(d, keepdim), ref_reduce(a, {d}, flat_ref));
    }
  Tensor u = from_vector<uint8_t>({3, 9, 9, 1}, {4});
  EXPECT_EQ(argmax(u).item(), 1.0);
  EXPECT_EQ(argmin(u).item(), 3.0);
  EXPECT_EQ(argmax(zeros({0, 4}), 1).shape(), (Shape{0}));
  expect_error([] { argmax(zeros({0})); }, "argmax");
  expect_error([] { argmin(zeros({3, 0}), 1); }, "argmin");
  expect_error([] { argmax(zeros({3, 0}), 2); }, "argmax");
}

// ------------------------------------------------------------------ var / std

TEST(Reduce, VarStdMatchReference) {
  Tensor a = randn64({4, 5, 6}, 18);
  for (const auto& dims : kDimSets)
    for (bool unbiased : {true, false})
      for (bool keepdim : {false, true}) {
        const double c = unbiased ? 1 : 0;
        expect_values(var(a, dims, unbiased, keepdim),
                      ref_reduce(a, dims, [c](const Values& v) { return ref_var(v, c); }), 1e-12, 1e-13);
        expect_values(ember::std(a, dims, unbiased, keepdim),
                      ref_reduce(a, dims, [c](const Values& v) { return std::sqrt(ref_var(v, c)); }), 1e-12, 1e-13);
      }
  Tensor t = a.permute({2, 0, 1}).slice(0, 1, 6, 2);
  expect_values(var(t, {1}), ref_reduce(t, {1}, [](const Values& v) { return ref_var(v, 1); }), 1e-12, 1e-13);
}

TEST(Reduce, VarIsAccurateInFloat32WithALargeMean) {
  // A naive float sum of squares minus the squared mean cancels catastrophically here.
  Generator g(19);
  Tensor noise = randn({200000}, {}, &g);
  Tensor a = noise + 10000.0f;
  const double want = ref_var(a.to_vector<double>(), 1);
  EXPECT_NEAR(var(a).item(), want, want * 1e-5);
  EXPECT_NEAR(var(a.view({400, 500}), {0}).mean().item(), 1.0, 0.05);
  expect_values(var(a.view({400, 500}), {0}),
                ref_reduce(a.view({400, 500}), {0}, [](const Values& v) { return ref_var(v, 1); }), 1e-5, 1e-6);
}

TEST(Reduce, VarOfTooFewElementsIsNan) {
  EXPECT_TRUE(std::isnan(var(ones({1})).item()));
  EXPECT_EQ(var(ones({1}), {}, false).item(), 0.0);
  EXPECT_TRUE(std::isnan(ember::std(zeros({0})).item()));
  EXPECT_TRUE(std::isnan(var(zeros({0, 2}), {0}).to_vector<float>()[1]));
  expect_error([] { var(from_vector<int32_t>({1, 2}, {2})); }, "var");
}

TEST(Reduce, VarStdGradcheck) {
  Tensor x = leaf(randn64({3, 4, 5}, 20));
  for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {1}, {0, 2}, {-1}})
    for (bool unbiased : {true, false})
      for (bool keepdim : {false, true}) {
        expect_gradcheck([&](const Tensor& t) { return var(t, dims, unbiased, keepdim); }, x);
        expect_gradcheck([&](const Tensor& t) { return ember::std(t, dims, unbiased, keepdim); }, x);
      }
  expect_gradcheck([](const Tensor& t) { return var(t.transpose(0, 1), {0}); }, x);
}

// ------------------------------------------------------------------ logsumexp / norm

TEST(Reduce, LogsumexpMatchesReferenceAndIsStable) {
  auto lse = [](const Values& v) {
    double m = *std::max_element(v.begin(), v.end());
    double s = 0;
    for (double x : v) s += std::exp(x - m);
    return m + std::log(s);
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    Generator g(21);
    Tensor a = randn({3, 4, 5}, {.dtype = dt}, &g);
    for (const auto& dims : kDimSets)
      for (bool keepdim : {false, true})
        expect_values(logsumexp(a, dims, keepdim), ref_reduce(a, dims, lse), 1e-6, 1e-6);
    expect_values(logsumexp(a.transpose(0, 2), {1}), ref_reduce(a.transpose(0, 2), {1}, lse), 1e-6, 1e-6);
  }
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

TEST(Reduce, LogsumexpGradcheck) {
  Tensor x = leaf(randn64({3, 4, 5}, 22));
  for (const auto& dims : kDimSets)
    for (bool keepdim : {false, true})
      expect_gradcheck([&](const Tensor& t) { return logsumexp(t, dims, keepdim); }, x);
}

TEST(Reduce, NormMatchesReference) {
  Tensor a = randn64({3, 4, 5}, 23);
  for (double p : {1.0, 2.0, 3.0, 0.5, kInf})
    for (const auto& dims : kDimSets)
      for (bool keepdim : {false, true}) {
        expect_values(norm(a, p, dims, keepdim),
                      ref_reduce(a, dims,
                                 [p](const Values& v) {
                                   double s = 0;
                                   for (double x : v)
                                     s = std::isinf(p) ? std::max(s, std::abs(x)) : s + std::pow(std::abs(x), p);
                                   return std::isinf(p) ? s : std::pow(s, 1.0 / p);
                                 }),
                      1e-12, 1e-12);
      }
  expect_values(norm(tensor({3, -4})), {5});
  expect_values(norm(a.transpose(0, 2).contiguous().transpose(0, 2), 2, {0}),
                ref_reduce(a, {0},
                           [](const Values& v) {
                             double s = 0;
                             for (double x : v) s += x * x;
                             return std::sqrt(s);
                           }),
                1e-12, 1e-12);
  expect_error([&] { norm(a, 0.0); }, "norm");
  expect_error([&] { norm(a, -1.0); }, "norm");
  expect_error([] { norm(from_vector<int32_t>({1}, {1})); }, "norm");
}

TEST(Reduce, NormGradcheck) {
  Tensor x = leaf(randn64({3, 4, 5}, 24));
  for (double p : {1.0, 2.0, 3.0, 1.5, kInf})
    for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {1}, {0, 2}})
      for (bool keepdim : {false, true})
        expect_gradcheck([&](const Tensor& t) { return norm(t, p, dims, keepdim); }, x);
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
