// Joins, splits and the index ops: hand-computed values of cat, stack, split, chunk, index_select,
// gather, scatter, masked_fill, one_hot, pad, tril/triu, sort, topk and embedding (ties, NaN,
// repeated indices, empty and 0-dim cases), the padding row's zero gradient, scatter_add and
// embedding's backward summed in index order (bit for bit, against a sequential sum), and every
// argument error. The finite differences and topk against a full sort are op-table rows
// (tests/ops/op_rows_index.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

namespace {

const TensorOptions kF64{.dtype = DType::Float64};
const TensorOptions kI64{.dtype = DType::Int64};

Tensor rnd(Shape s, bool rg = true) {
  Tensor t = randn(std::move(s), kF64);
  if (rg) t.requires_grad_();
  return t;
}

Tensor ivec(std::vector<int64_t> v, Shape s = {}) {
  if (s.empty()) s = {static_cast<int64_t>(v.size())};
  return from_vector(v, s);
}

std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

std::vector<int64_t> ivals(const Tensor& t) {
  return t.to_vector<int64_t>();
}

}  // namespace

// ---------------------------------------------------------------- cat / stack

TEST(IndexCat, Values) {
  Tensor a = tensor({{1, 2}, {3, 4}}), b = tensor({{5, 6}});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(c), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Tensor d = cat({a, b.t(), a.t()}, -1);  // transposed (non-contiguous) pieces
  EXPECT_EQ(d.shape(), (Shape{2, 5}));
  EXPECT_EQ(vals(d), (std::vector<double>{1, 2, 5, 1, 3, 3, 4, 6, 2, 4}));
  // 1-D empty tensors are skipped; empty pieces along dim are fine.
  EXPECT_EQ(vals(cat({zeros({0}), a, zeros({0, 2})})), vals(a));
  EXPECT_EQ(cat({zeros({0, 3}), zeros({0, 3})}).shape(), (Shape{0, 3}));
  Tensor e = cat({zeros({2, 0, 3}), ones({2, 2, 3}), zeros({2, 1, 3})}, 1);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(e.sum().item(), 12.0);
  Tensor i = cat({ivec({1, 2}), ivec({3})});
  EXPECT_EQ(i.dtype(), DType::Int64);
  EXPECT_EQ(ivals(i), (std::vector<int64_t>{1, 2, 3}));
}

TEST(IndexCat, Errors) {
  expect_error([] { cat({}); }, "cat", "non-empty");
  expect_error([] { cat({zeros({2}), zeros({2}, kF64)}); }, "cat", "tensor 1 has dtype float64");
  expect_error([] { cat({zeros({2, 3}), zeros({2, 3}), zeros({2, 4})}, 0); }, "cat", "tensor 2 has shape [2, 4]");
  expect_error([] { cat({zeros({2, 3}), zeros({2, 3, 1})}); }, "cat", "tensor 1");
  expect_error([] { cat({zeros({}), zeros({})}); }, "cat", "0-dim");
  expect_error([] { cat({zeros({2, 3})}, 2); }, "cat", "dim 2 out of range");
  expect_error([] { cat({zeros({2}), Tensor()}); }, "cat", "tensor 1 is undefined");
}

TEST(IndexStack, ValuesAndErrors) {
  Tensor a = tensor({1, 2}), b = tensor({3, 4});
  EXPECT_EQ(vals(stack({a, b})), (std::vector<double>{1, 2, 3, 4}));
  Tensor s = stack({a, b}, -1);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(s), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(stack({zeros({}), ones({})}).shape(), (Shape{2}));
  EXPECT_EQ(stack({zeros({0, 2}), zeros({0, 2})}, 1).shape(), (Shape{0, 2, 2}));
  expect_error([] { stack({}); }, "stack", "non-empty");
  expect_error([] { stack({zeros({2}), zeros({3})}); }, "stack", "tensor 1 has shape [3]");
  expect_error([] { stack({zeros({2}), zeros({2}, kF64)}); }, "stack", "tensor 1");
  expect_error([] { stack({zeros({2})}, 2); }, "stack", "dim");
}

// ---------------------------------------------------------------- split / chunk

TEST(IndexSplit, SizesAndViews) {
  Tensor a = arange(10, kF64).reshape({5, 2});
  auto parts = split(a, 2);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(vals(parts[2]), (std::vector<double>{8, 9}));
  // Views share storage.
  EXPECT_EQ(parts[1].storage().get(), a.storage().get());
  auto cols = split(a, {1, 1}, 1);
  EXPECT_EQ(vals(cols[1]), (std::vector<double>{1, 3, 5, 7, 9}));
  auto z = split(a, {0, 5, 0});
  EXPECT_EQ(z[0].shape(), (Shape{0, 2}));
  EXPECT_EQ(z[1].shape(), (Shape{5, 2}));
  EXPECT_EQ(split(zeros({0, 3}), 2).size(), 1u);
  EXPECT_EQ(split(zeros({0, 3}), 0).size(), 1u);
}

TEST(IndexSplit, ChunkFollowsPyTorch) {
  auto sizes = [](const std::vector<Tensor>& v) {
    std::vector<int64_t> s;
    for (const auto& t : v) s.push_back(t.size(0));
    return s;
  };
  EXPECT_EQ(sizes(chunk(zeros({5}), 3)), (std::vector<int64_t>{2, 2, 1}));
  EXPECT_EQ(sizes(chunk(zeros({6}), 4)), (std::vector<int64_t>{2, 2, 2}));  // ceil size: 3 chunks
  EXPECT_EQ(sizes(chunk(zeros({2}), 5)), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(sizes(chunk(zeros({0}), 3)), (std::vector<int64_t>{0, 0, 0}));
  auto c = chunk(arange(6, kF64).reshape({2, 3}), 3, -1);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(vals(c[2]), (std::vector<double>{2, 5}));
}

TEST(IndexSplit, Errors) {
  expect_error([] { split(zeros({4}), 0); }, "split", "positive");
  expect_error([] { split(zeros({4}), -1); }, "split", "positive");
  expect_error([] { split(zeros({4}), {1, 2}); }, "split", "sum to 3");
  expect_error([] { split(zeros({4}), {5, -1}); }, "split", "non-negative");
  expect_error([] { split(zeros({}), 1); }, "split", "0-dim");
  expect_error([] { split(zeros({4}), 1, 1); }, "split", "dim");
  expect_error([] { chunk(zeros({4}), 0); }, "chunk", "positive");
  expect_error([] { chunk(zeros({}), 2); }, "chunk", "0-dim");
}

// ---------------------------------------------------------------- index_select / gather / scatter

TEST(IndexSelect, Values) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(vals(index_select(a, 1, ivec({2, 0, 2}))), (std::vector<double>{3, 1, 3, 6, 4, 6}));
  EXPECT_EQ(vals(index_select(a, 0, ivec({1}).to(DType::Int32))), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(vals(index_select(a.t(), 0, ivec({2, 1}))), (std::vector<double>{3, 6, 2, 5}));
  EXPECT_EQ(index_select(a, 0, zeros({0}, kI64)).shape(), (Shape{0, 3}));
  EXPECT_EQ(index_select(a, 1, scalar_tensor(1, kI64)).shape(), (Shape{2, 1}));
  Tensor i = index_select(ivec({7, 8, 9}), 0, ivec({2, 2}));
  EXPECT_EQ(ivals(i), (std::vector<int64_t>{9, 9}));
}

TEST(IndexSelect, Errors) {
  Tensor a = zeros({2, 3});
  expect_error(
      [&] {
        index_select(a, 1, ivec({0, 5}));
      },
      "index_select", "index 5 is out of range for dim 1 of size 3 (valid range [0, 2])");
  expect_error([&] { index_select(a, 0, ivec({-1})); }, "index_select", "index -1");
  expect_error([&] { index_select(a, 0, ivec({0, 1}, {1, 2})); }, "index_select", "1-D");
  expect_error([&] { index_select(a, 0, tensor({0})); }, "index_select", "int64 or int32");
  expect_error([&] { index_select(a, 2, ivec({0})); }, "index_select", "dim");
  expect_error([&] { index_select(zeros({}), 0, ivec({0})); }, "index_select", "0-dim");
  expect_error([&] { index_select(zeros({0, 2}), 0, ivec({0})); }, "index_select", "size 0");
}

TEST(IndexGather, Values) {
  Tensor a = tensor({{1, 2}, {3, 4}});
  EXPECT_EQ(vals(gather(a, 1, ivec({0, 0, 1, 0}, {2, 2}))), (std::vector<double>{1, 1, 4, 3}));
  EXPECT_EQ(vals(gather(a, 0, ivec({1, 0}, {1, 2}))), (std::vector<double>{3, 2}));
  // Index smaller than the input in a non-gathered dim, non-contiguous input and index.
  Tensor b = arange(12, kF64).reshape({3, 4});
  EXPECT_EQ(vals(gather(b, 1, ivec({3, 1}, {2, 1}))), (std::vector<double>{3, 5}));
  Tensor it = ivec({2, 0, 1, 1}, {2, 2}).t();  // [[2, 1], [0, 1]]
  EXPECT_EQ(vals(gather(b.t(), 1, it)), (std::vector<double>{8, 4, 1, 5}));
  EXPECT_EQ(gather(b, 0, zeros({0, 4}, kI64)).shape(), (Shape{0, 4}));
  EXPECT_EQ(gather(scalar_tensor(5, kF64), 0, scalar_tensor(0, kI64)).item(), 5.0);
}

TEST(IndexGather, Errors) {
  Tensor a = zeros({2, 3});
  expect_error([&] { gather(a, 1, ivec({3}, {1, 1})); }, "gather", "index 3 is out of range for dim 1 of size 3");
  expect_error([&] { gather(a, 1, ivec({0})); }, "gather", "as many dims");
  expect_error([&] { gather(a, 1, ivec({0, 0, 0}, {3, 1})); }, "gather", "larger");
  expect_error([&] { gather(a, 1, zeros({1, 1})); }, "gather", "int64 or int32");
}

TEST(IndexScatter, Values) {
  Tensor a = zeros({2, 3});
  Tensor src = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor idx = ivec({2, 0, 1, 0, 0, 0}, {2, 3});
  // Repeated indices: the last write (in index order) wins.
  EXPECT_EQ(vals(scatter(a, 1, idx, src)), (std::vector<double>{2, 3, 1, 6, 0, 0}));
  EXPECT_EQ(vals(scatter_add(a, 1, idx, src)), (std::vector<double>{2, 3, 1, 15, 0, 0}));
  // src larger than index; scatter along dim 0; the input is not modified.
  Tensor b = ones({3, 2});
  Tensor r = scatter(b, 0, ivec({2, 0}, {1, 2}), src);
  EXPECT_EQ(vals(r), (std::vector<double>{1, 2, 1, 1, 1, 1}));
  EXPECT_EQ(vals(b), (std::vector<double>{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(vals(scatter_add(b.t(), 1, ivec({2, 2}, {1, 2}), src)), (std::vector<double>{1, 1, 4, 1, 1, 1}));
  Tensor ints = scatter_add(zeros({3}, kI64), 0, ivec({1, 1, 2}), ivec({5, 6, 7}));
  EXPECT_EQ(ivals(ints), (std::vector<int64_t>{0, 11, 7}));
  EXPECT_EQ(vals(scatter(a, 0, zeros({0, 3}, kI64), src)), vals(a));
}

TEST(IndexScatter, Errors) {
  Tensor a = zeros({2, 3}), src = zeros({2, 3});
  expect_error([&] { scatter(a, 1, ivec({3}, {1, 1}), src); }, "scatter", "index 3 is out of range");
  expect_error([&] { scatter_add(a, 0, ivec({-2}, {1, 1}), src); }, "scatter_add", "index -2");
  expect_error([&] { scatter(a, 1, ivec({0}, {1, 1}), zeros({2, 3}, kF64)); }, "scatter", "src dtype");
  expect_error([&] { scatter(a, 0, ivec({0, 0, 0, 0}, {1, 4}), zeros({2, 4})); }, "scatter", "larger");
  expect_error([&] { scatter(a, 1, ivec({0, 0}, {1, 2}), zeros({1, 1})); }, "scatter", "larger than src");
  expect_error([&] { scatter(a, 1, ivec({0}), src); }, "scatter", "as many dims");
}

TEST(IndexScatter, LargeAccumulationIsDeterministic) {
  // Enough work to take the parallel paths; compared with a sequential sum and with itself.
  Generator gen(7);
  const int64_t rows = 300, cols = 100, n = 1000;
  Tensor idx = randint(0, rows, {n, cols}, kI64, &gen);
  Tensor src = randn({n, cols}, kF64, &gen);
  Tensor r1 = scatter_add(zeros({rows, cols}, kF64), 0, idx, src);
  Tensor r2 = scatter_add(zeros({rows, cols}, kF64), 0, idx, src);
  EXPECT_EQ(vals(r1), vals(r2));
  auto iv = ivals(idx);
  auto sv = vals(src);
  std::vector<double> ref(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cols; ++j) ref[iv[i * cols + j] * cols + j] += sv[i * cols + j];
  EXPECT_EQ(vals(r1), ref);  // same order of additions, so bit-for-bit
}

// ---------------------------------------------------------------- masked_fill / one_hot

TEST(IndexMaskedFill, ValuesBroadcastAndErrors) {
  Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor m = from_vector(std::vector<uint8_t>{1, 0, 1}, {3}).to(DType::Bool);
  EXPECT_EQ(vals(masked_fill(a, m, -1)), (std::vector<double>{-1, 2, -1, -1, 5, -1}));
  EXPECT_EQ(vals(a), (std::vector<double>{1, 2, 3, 4, 5, 6}));  // out of place
  Tensor col = from_vector(std::vector<uint8_t>{0, 1}, {2, 1}).to(DType::Bool);
  Tensor r = masked_fill(tensor({7, 8}), col, 0);  // mask broadcasts the result up
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(r), (std::vector<double>{7, 8, 0, 0}));
  EXPECT_EQ(ivals(masked_fill(ivec({1, 2, 3}), m, 9)), (std::vector<int64_t>{9, 2, 9}));
  EXPECT_TRUE(std::isinf(vals(masked_fill(a.t(), col.t(), -INFINITY))[1]));
  expect_error([&] { masked_fill(a, ones({3}), 0); }, "masked_fill", "bool");
  expect_error([&] { masked_fill(a, from_vector(std::vector<uint8_t>(4, 0), {4}).to(DType::Bool), 0); }, "masked_fill",
               "broadcast");
}

TEST(IndexOneHot, ValuesAndErrors) {
  Tensor o = one_hot(ivec({0, 2, 1}));
  EXPECT_EQ(o.dtype(), DType::Int64);
  EXPECT_EQ(o.shape(), (Shape{3, 3}));
  EXPECT_EQ(ivals(o), (std::vector<int64_t>{1, 0, 0, 0, 0, 1, 0, 1, 0}));
  Tensor o2 = one_hot(ivec({1, 0, 1, 1}, {2, 2}).to(DType::Int32), 4);
  EXPECT_EQ(o2.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(ivals(o2.sum({0, 1})), (std::vector<int64_t>{1, 3, 0, 0}));
  EXPECT_EQ(one_hot(zeros({0}, kI64), 5).shape(), (Shape{0, 5}));
  EXPECT_EQ(one_hot(scalar_tensor(2, kI64), 3).shape(), (Shape{3}));
  expect_error([] { one_hot(ivec({0, 3}), 3); }, "one_hot", "class value 3 is out of range for num_classes 3");
  expect_error([] { one_hot(ivec({-1, 0})); }, "one_hot", "non-negative");
  expect_error([] { one_hot(zeros({0}, kI64)); }, "one_hot", "empty");
  expect_error([] { one_hot(ivec({0}), -2); }, "one_hot", "num_classes");
  expect_error([] { one_hot(tensor({0, 1})); }, "one_hot", "int64 or int32");
}

// ---------------------------------------------------------------- pad

TEST(IndexPad, ConstantValues) {
  Tensor a = tensor({1, 2, 3});
  EXPECT_EQ(vals(pad(a, {2, 1})), (std::vector<double>{0, 0, 1, 2, 3, 0}));
  EXPECT_EQ(vals(pad(a, {1, 1}, PadMode::Constant, -5)), (std::vector<double>{-5, 1, 2, 3, -5}));
  EXPECT_EQ(vals(pad(a, {-1, 1})), (std::vector<double>{2, 3, 0}));  // negative pads crop
  EXPECT_EQ(vals(pad(a, {-1, -1})), (std::vector<double>{2}));
  EXPECT_EQ(pad(a, {-3, 0}).shape(), (Shape{0}));
  EXPECT_EQ(vals(pad(a, {-4, 2})), (std::vector<double>{0}));
  Tensor b = tensor({{1, 2}, {3, 4}});
  Tensor p = pad(b, {1, 0, 0, 1});  // last dim (1, 0), then dim 0 (0, 1)
  EXPECT_EQ(p.shape(), (Shape{3, 3}));
  EXPECT_EQ(vals(p), (std::vector<double>{0, 1, 2, 0, 3, 4, 0, 0, 0}));
  EXPECT_EQ(vals(pad(b.t(), {0, 1})), (std::vector<double>{1, 3, 0, 2, 4, 0}));
  EXPECT_EQ(pad(zeros({2, 3, 4}), {1, 1, 2, 2, 3, 3}).shape(), (Shape{8, 7, 6}));
  EXPECT_EQ(vals(pad(zeros({0}), {1, 1}, PadMode::Constant, 2)), (std::vector<double>{2, 2}));
  EXPECT_EQ(vals(pad(b, {})), vals(b));
}

TEST(IndexPad, ReflectValues) {
  Tensor a = tensor({0, 1, 2, 3});
  EXPECT_EQ(vals(pad(a, {2, 1}, PadMode::Reflect)), (std::vector<double>{2, 1, 0, 1, 2, 3, 2}));
  EXPECT_EQ(vals(pad(a, {3, 3}, PadMode::Reflect)), (std::vector<double>{3, 2, 1, 0, 1, 2, 3, 2, 1, 0}));
  Tensor b = tensor({{1, 2, 3}, {4, 5, 6}});
  Tensor p = pad(b, {1, 1, 1, 0}, PadMode::Reflect);
  EXPECT_EQ(p.shape(), (Shape{3, 5}));
  EXPECT_EQ(vals(p), (std::vector<double>{5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5}));
  Tensor q = pad(arange(8, kF64).reshape({2, 2, 2}), {1, 0, 0, 1, 1, 0}, PadMode::Reflect);
  EXPECT_EQ(q.shape(), (Shape{3, 3, 3}));
  EXPECT_EQ(vals(q.select(0, 0)), vals(q.select(0, 2)));  // the first plane reflects plane 1 of the input
  Tensor same = pad(b, {0, 0}, PadMode::Reflect);
  EXPECT_EQ(vals(same), vals(b));
  EXPECT_FALSE(same.is_same(b));
}

TEST(IndexPad, Errors) {
  Tensor a = zeros({2, 3});
  expect_error([&] { pad(a, {1}); }, "pad", "pairs");
  expect_error([&] { pad(a, {1, 1, 1, 1, 1, 1}); }, "pad", "3 padded dims");
  expect_error([&] { pad(a, {3, 0}, PadMode::Reflect); }, "pad", "smaller than the size 3");
  expect_error([&] { pad(a, {-1, 0}, PadMode::Reflect); }, "pad", "non-negative");
  expect_error([&] { pad(a, {-2, -2}); }, "pad", "negative");
}

// ---------------------------------------------------------------- tril / triu

TEST(IndexTrilu, Values) {
  Tensor a = arange(1, 13, 1, kF64).reshape({3, 4});
  EXPECT_EQ(vals(tril(a)), (std::vector<double>{1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_EQ(vals(tril(a, -1)), (std::vector<double>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
  EXPECT_EQ(vals(triu(a, 1)), (std::vector<double>{0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}));
  EXPECT_EQ(vals(triu(a, -1)), (std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}));
  EXPECT_EQ(vals(triu(a, 10)), std::vector<double>(12, 0.0));
  EXPECT_EQ(vals(tril(a, 10)), vals(a));
  EXPECT_EQ(vals(tril(a.t())), (std::vector<double>{1, 0, 0, 2, 6, 0, 3, 7, 11, 4, 8, 12}));
  Tensor b = ones({2, 2, 2}, kI64);
  EXPECT_EQ(ivals(triu(b)), (std::vector<int64_t>{1, 1, 0, 1, 1, 1, 0, 1}));
  Tensor c = ones({2, 3, 3}).permute({1, 0, 2});  // non-contiguous batch
  EXPECT_EQ(tril(c).sum().item(), 9.0);           // 1 + 2 kept per [2, 3] matrix
  EXPECT_EQ(tril(zeros({0, 3})).shape(), (Shape{0, 3}));
  expect_error([] { tril(zeros({3})); }, "tril", "at least 2 dims");
  expect_error([] { triu(zeros({})); }, "triu", "at least 2 dims");
}

TEST(IndexSort, StableValuesAndIndices) {
  Tensor a = tensor({3, 1, 2, 1, 3});
  auto [v, i] = sort(a);
  EXPECT_EQ(vals(v), (std::vector<double>{1, 1, 2, 3, 3}));
  EXPECT_EQ(ivals(i), (std::vector<int64_t>{1, 3, 2, 0, 4}));
  auto [vd, id] = sort(a, 0, true);
  EXPECT_EQ(vals(vd), (std::vector<double>{3, 3, 2, 1, 1}));
  EXPECT_EQ(ivals(id), (std::vector<int64_t>{0, 4, 2, 1, 3}));
  EXPECT_EQ(i.dtype(), DType::Int64);
  // Along dim 0 of a transposed view.
  Tensor b = tensor({{5, 1, 4}, {2, 6, 3}}).t();  // [[5, 2], [1, 6], [4, 3]]
  auto [vb, ib] = sort(b, 0);
  EXPECT_EQ(vals(vb), (std::vector<double>{1, 2, 4, 3, 5, 6}));
  EXPECT_EQ(ivals(ib), (std::vector<int64_t>{1, 0, 2, 2, 0, 1}));
  auto [vi, ii] = sort(ivec({4, -2, 9}), -1, true);
  EXPECT_EQ(ivals(vi), (std::vector<int64_t>{9, 4, -2}));
  EXPECT_EQ(ivals(ii), (std::vector<int64_t>{2, 0, 1}));
}

TEST(IndexSort, NanIsLargest) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = from_vector(std::vector<double>{2, nan, -1, nan, 0}, {5});
  auto [v, i] = sort(a);
  EXPECT_EQ(ivals(i), (std::vector<int64_t>{2, 4, 0, 1, 3}));
  auto [vd, id] = sort(a, 0, true);
  EXPECT_EQ(ivals(id), (std::vector<int64_t>{1, 3, 0, 4, 2}));
  EXPECT_TRUE(std::isnan(vals(vd)[0]));
  auto [tv, ti] = topk(a, 2);
  EXPECT_EQ(ivals(ti), (std::vector<int64_t>{1, 3}));
}

TEST(IndexTopk, Values) {
  Tensor a = tensor({{1, 9, 3, 7}, {8, 2, 8, 4}});
  auto [v, i] = topk(a, 2);
  EXPECT_EQ(vals(v), (std::vector<double>{9, 7, 8, 8}));
  EXPECT_EQ(ivals(i), (std::vector<int64_t>{1, 3, 0, 2}));
  auto [vs, is] = topk(a, 3, 1, false);
  EXPECT_EQ(vals(vs), (std::vector<double>{1, 3, 7, 2, 4, 8}));
  EXPECT_EQ(ivals(is), (std::vector<int64_t>{0, 2, 3, 1, 3, 0}));
  auto [v0, i0] = topk(a, 1, 0);
  EXPECT_EQ(vals(v0), (std::vector<double>{8, 9, 8, 7}));
  EXPECT_EQ(ivals(i0), (std::vector<int64_t>{1, 0, 1, 0}));
  EXPECT_EQ(topk(a, 0).first.shape(), (Shape{2, 0}));
  EXPECT_EQ(topk(zeros({0, 3}), 2).first.shape(), (Shape{0, 2}));
  EXPECT_EQ(topk(scalar_tensor(4), 1).first.item(), 4.0);
}

TEST(IndexSort, Errors) {
  expect_error([] { topk(zeros({2, 3}), 4); }, "topk", "k 4 is out of range for dim 1 of size 3");
  expect_error([] { topk(zeros({2, 3}), -1); }, "topk", "k -1");
  expect_error([] { topk(zeros({2, 3}), 1, 2); }, "topk", "dim");
  expect_error([] { sort(zeros({2, 3}), -3); }, "sort", "dim");
}

// ---------------------------------------------------------------- embedding

TEST(IndexEmbedding, ValuesAndPaddingGradient) {
  Tensor w = arange(12, kF64).reshape({4, 3}).detach().requires_grad_();
  Tensor idx = ivec({1, 3, 1, 0, 2, 1}, {2, 3});
  Tensor e = embedding(w, idx, 1);
  EXPECT_EQ(e.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(vals(e.select(0, 0).select(0, 1)), (std::vector<double>{9, 10, 11}));
  EXPECT_EQ(vals(e.select(0, 1).select(0, 2)), (std::vector<double>{3, 4, 5}));  // padding rows still look up
  e.sum().backward();
  // Row 1 (padding) gets nothing; row 3 once, 0 once, 2 once.
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  Tensor w2 = arange(12, kF64).reshape({4, 3}).detach().requires_grad_();
  embedding(w2, idx.to(DType::Int32)).sum().backward();
  EXPECT_EQ(vals(w2.grad()), (std::vector<double>{1, 1, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(embedding(w, zeros({0}, kI64)).shape(), (Shape{0, 3}));
  EXPECT_EQ(embedding(w, scalar_tensor(2, kI64)).shape(), (Shape{3}));
}

TEST(IndexEmbedding, PaddingRowGetsNoGradient) {
  Tensor idx = ivec({4, 0, 4, 2, 4, 1}, {3, 2});
  // With padding_idx the padding row's gradient is zero (the rows it does not pad add up as
  // usual), which finite differences do not know about.
  Tensor w2 = rnd({5, 3});
  Tensor g = ones({3, 2, 3}, kF64);
  embedding(w2, idx, 4).backward(g);
  auto gv = vals(w2.grad());
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(gv[4 * 3 + j], 0.0);
    EXPECT_EQ(gv[0 * 3 + j], 1.0);
    EXPECT_EQ(gv[3 * 3 + j], 0.0);
  }
}

TEST(IndexEmbedding, LargeBackwardIsDeterministic) {
  Generator gen(3);
  const int64_t num = 1000, width = 8, n = 140000;
  Tensor idx = randint(0, num, {n}, kI64, &gen);
  std::vector<double> gv(static_cast<size_t>(n * width));
  for (size_t i = 0; i < gv.size(); ++i) gv[i] = std::sin(static_cast<double>(i));  // varied, cheap to make
  Tensor g = from_vector(gv, {n, width});
  auto grad_of = [&] {
    Tensor w = zeros({num, width}, kF64).requires_grad_();
    embedding(w, idx).backward(g);
    return vals(w.grad());
  };
  auto a = grad_of(), b = grad_of();
  EXPECT_EQ(a, b);
  auto iv = ivals(idx);
  std::vector<double> ref(static_cast<size_t>(num * width), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < width; ++j) ref[iv[i] * width + j] += gv[i * width + j];
  EXPECT_EQ(a, ref);
}

TEST(IndexEmbedding, Errors) {
  Tensor w = zeros({10, 3});
  expect_error(
      [&] {
        embedding(w, ivec({1, 10}));
      },
      "embedding", "index 10 is out of range for a table of 10 rows (valid range [0, 9])");
  expect_error([&] { embedding(w, ivec({-3})); }, "embedding", "index -3");
  expect_error([&] { embedding(zeros({10}), ivec({1})); }, "embedding", "2-D");
  expect_error([&] { embedding(w, ivec({1}), 10); }, "embedding", "padding_idx 10");
  expect_error([&] { embedding(w, ivec({1}), -2); }, "embedding", "padding_idx -2");
  expect_error([&] { embedding(w, tensor({1})); }, "embedding", "int64 or int32");
}
