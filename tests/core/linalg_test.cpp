#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/ops.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;

namespace {

const TensorOptions kF64{.dtype = DType::Float64};

Tensor rnd(Shape s, DType dt = DType::Float64, bool rg = false) {
  Tensor t = randn(std::move(s), {.dtype = dt});
  if (rg) t.requires_grad_();
  return t;
}

// NumPy-semantics matmul computed with plain loops in double, as the reference.
Tensor ref_matmul(const Tensor& a_in, const Tensor& b_in) {
  Shape sa = a_in.shape(), sb = b_in.shape();
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  std::vector<double> av = a_in.to_vector<double>(), bv = b_in.to_vector<double>();
  const int64_t n = sa[sa.size() - 2], k = sa.back(), m = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  const size_t nb = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), nb - ba.size(), 1);
  bb.insert(bb.begin(), nb - bb.size(), 1);
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) batch[i] = std::max(ba[i], bb[i]);
  const int64_t total = numel_of(batch);
  std::vector<double> out(static_cast<size_t>(total * n * m), 0.0);
  for (int64_t t = 0; t < total; ++t) {
    int64_t rem = t, oa = 0, ob = 0, mula = 1, mulb = 1;
    for (int64_t d = static_cast<int64_t>(nb) - 1; d >= 0; --d) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      oa += (ba[d] == 1 ? 0 : i) * mula;
      ob += (bb[d] == 1 ? 0 : i) * mulb;
      mula *= ba[d];
      mulb *= bb[d];
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += av[(oa * n + i) * k + p] * bv[(ob * k + p) * m + j];
        out[(t * n + i) * m + j] = acc;
      }
  }
  Shape os = batch;
  if (!va) os.push_back(n);
  if (!vb) os.push_back(m);
  return from_vector(out, os, kF64);
}

void expect_close(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol) << "element " << i;
}

}  // namespace

// ---------------------------------------------------------------- GEMM against a naive loop

TEST(Linalg, SgemmMatchesNaiveOnOddSizes) {
  const int64_t sizes[] = {1, 7, 33, 129};
  for (int64_t m : sizes)
    for (int64_t k : sizes)
      for (int64_t n : sizes) {
        Tensor a = rnd({m, k}, DType::Float32), b = rnd({k, n}, DType::Float32);
        Tensor ref = ref_matmul(a, b);
        expect_close(mm(a, b), ref, 1e-4 * std::sqrt(static_cast<double>(k)) + 1e-5);
        // Transposed operands reach BLAS with the transpose flag, not as copies.
        Tensor at = rnd({k, m}, DType::Float32), bt = rnd({n, k}, DType::Float32);
        expect_close(mm(at.t(), bt.t()), ref_matmul(at.t().contiguous(), bt.t().contiguous()),
                     1e-4 * std::sqrt(static_cast<double>(k)) + 1e-5);
      }
}

TEST(Linalg, DgemmMatchesNaiveWithStridedOperands) {
  // Sliced rows (leading dimension larger than the row), every-other column (needs a copy), and
  // transposed slices.
  Tensor big = rnd({40, 50});
  Tensor a = big.slice(0, 3, 20).slice(1, 5, 30);     // [17, 25], ld 50
  Tensor b = big.slice(0, 0, 25).slice(1, 0, 50, 2);  // [25, 25], column stride 2
  expect_close(mm(a, b), ref_matmul(a.contiguous(), b.contiguous()), 1e-10);
  Tensor c = big.slice(1, 0, 17).t();  // [17, 40] transposed with ld 50
  Tensor d = rnd({40, 3});
  expect_close(mm(c, d), ref_matmul(c.contiguous(), d), 1e-10);
  // An expanded (stride 0) matrix.
  Tensor e = rnd({1, 6}).expand({4, 6});
  Tensor f = rnd({6, 5});
  expect_close(mm(e, f), ref_matmul(e.contiguous(), f), 1e-10);
}

TEST(Linalg, MatrixVectorShapesUseGemvCorrectly) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = ta ? rnd({9, 13}).t() : rnd({13, 9});
      Tensor x = tb ? rnd({1, 9}).t() : rnd({9, 1});
      expect_close(mm(a, x), ref_matmul(a.contiguous(), x.contiguous()), 1e-10);
      Tensor row = ta ? rnd({13, 1}).t() : rnd({1, 13});
      Tensor b = tb ? rnd({7, 13}).t() : rnd({13, 7});
      expect_close(mm(row, b), ref_matmul(row.contiguous(), b.contiguous()), 1e-10);
    }
  // Strided vectors.
  Tensor v = rnd({20}).slice(0, 0, 20, 2);
  Tensor m = rnd({4, 10});
  expect_close(matmul(m, v), ref_matmul(m, v.contiguous()), 1e-10);
  expect_close(matmul(v, m.t()), ref_matmul(v.contiguous(), m.t().contiguous()), 1e-10);
}

// ---------------------------------------------------------------- matmul semantics

TEST(Linalg, MatmulValuesHandComputed) {
  Tensor a = tensor({{1, 2}, {3, 4}});
  Tensor b = tensor({{5, 6}, {7, 8}});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(a.matmul(b).to_vector<float>(), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(a.mm(b.t()).to_vector<float>(), (std::vector<float>{17, 23, 39, 53}));
  Tensor v = tensor({1, -1});
  EXPECT_EQ(matmul(a, v).to_vector<float>(), (std::vector<float>{-1, -1}));
  EXPECT_EQ(matmul(v, a).to_vector<float>(), (std::vector<float>{-2, -2}));
  Tensor d = matmul(v, tensor({3, 4}));
  EXPECT_EQ(d.dim(), 0);
  EXPECT_FLOAT_EQ(d.item<float>(), -1.0f);
  EXPECT_FLOAT_EQ(dot(tensor({1, 2, 3}), tensor({4, 5, 6})).item<float>(), 32.0f);
  EXPECT_EQ(outer(tensor({1, 2}), tensor({3, 4, 5})).to_vector<float>(), (std::vector<float>{3, 4, 5, 6, 8, 10}));
}

TEST(Linalg, MatmulEveryRankCombinationMatchesReference) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{5}, {5}},
                                                      {{5}, {5, 3}},
                                                      {{4, 5}, {5}},
                                                      {{4, 5}, {5, 3}},
                                                      {{2, 4, 5}, {5, 3}},
                                                      {{4, 5}, {2, 5, 3}},
                                                      {{2, 4, 5}, {2, 5, 3}},
                                                      {{5}, {2, 5, 3}},
                                                      {{2, 4, 5}, {5}},
                                                      {{2, 1, 4, 5}, {3, 5, 2}},
                                                      {{1, 4, 5}, {3, 5, 2}},
                                                      {{3, 1, 2, 4, 5}, {1, 2, 1, 5, 3}},
                                                      {{2, 3, 4, 5}, {2, 3, 5, 6}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = rnd(sa), b = rnd(sb);
    expect_close(matmul(a, b), ref_matmul(a, b), 1e-10);
  }
}

TEST(Linalg, BatchedNonContiguousOperands) {
  // Transposed batch, permuted batch dims (batch strides that do not coalesce), broadcast views.
  Tensor x = rnd({3, 6, 4});
  Tensor a = x.transpose(1, 2);                  // [3, 4, 6] transposed matrices
  Tensor y = rnd({6, 3, 5}).permute({1, 0, 2});  // [3, 6, 5] with a non-contiguous batch
  expect_close(bmm(a, y), ref_matmul(a.contiguous(), y.contiguous()), 1e-10);
  Tensor w = rnd({2, 3, 4, 6}).permute({1, 0, 2, 3});  // [3, 2, 4, 6]
  Tensor z = rnd({5, 6}).t().unsqueeze(0).expand({2, 6, 5});
  expect_close(matmul(w, z), ref_matmul(w.contiguous(), z.contiguous()), 1e-10);
}

TEST(Linalg, ManySmallBatchedProductsFloat32) {
  Tensor a = rnd({64, 8, 7}, DType::Float32), b = rnd({64, 7, 9}, DType::Float32);
  expect_close(bmm(a, b), ref_matmul(a, b), 1e-4);
  Tensor big_a = rnd({3, 70, 80}, DType::Float32), big_b = rnd({3, 80, 90}, DType::Float32);
  expect_close(bmm(big_a, big_b), ref_matmul(big_a, big_b), 1e-3);
}

TEST(Linalg, FoldedBatchTimesMatrix) {
  // [B, T, K] x [K, N] runs as one tall GEMM; a sliced batch must not fold.
  Tensor a = rnd({4, 5, 6}), w = rnd({6, 3});
  expect_close(matmul(a, w), ref_matmul(a, w), 1e-10);
  Tensor s = rnd({4, 7, 6}).slice(1, 1, 6);  // rows continue, batch stride 42 != 5 * 6
  expect_close(matmul(s, w), ref_matmul(s.contiguous(), w), 1e-10);
  Tensor w1 = rnd({1, 1, 6, 3});
  expect_close(matmul(a, w1), ref_matmul(a, w1), 1e-10);
}

TEST(Linalg, AddmmValuesAndBroadcastBias) {
  Tensor a = rnd({4, 3}), b = rnd({3, 5});
  Tensor ab = ref_matmul(a, b);
  for (Shape bs : {Shape{5}, Shape{1, 5}, Shape{4, 1}, Shape{4, 5}, Shape{}}) {
    Tensor bias = rnd(bs);
    Tensor want = add(mul(bias.expand({4, 5}).contiguous(), 0.5), mul(ab, 2.0));
    expect_close(addmm(bias, a, b, 0.5, 2.0), want, 1e-10);
  }
  // beta = 0 ignores the bias, NaN included, as BLAS does.
  Tensor nan_bias = full({4, 5}, std::numeric_limits<double>::quiet_NaN(), kF64);
  expect_close(addmm(nan_bias, a, b, 0.0, 1.0), ab, 1e-10);
  // Transposed operands.
  expect_close(addmm(zeros({4}, kF64), b.t(), a.t()), ref_matmul(b.t().contiguous(), a.t().contiguous()), 1e-10);
}

TEST(Linalg, EmptyShapes) {
  EXPECT_EQ(mm(rnd({0, 3}), rnd({3, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(mm(rnd({2, 3}), rnd({3, 0})).shape(), (Shape{2, 0}));
  Tensor z = mm(rnd({2, 0}), rnd({0, 3}));
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  for (double v : z.to_vector<double>()) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(bmm(rnd({0, 2, 3}), rnd({0, 3, 4})).shape(), (Shape{0, 2, 4}));
  EXPECT_EQ(dot(rnd({0}), rnd({0})).item(), 0.0);
  Tensor bias = tensor({1, 2, 3}, kF64);
  expect_close(addmm(bias, rnd({2, 0}), rnd({0, 3}), 2.0), tensor({{2, 4, 6}, {2, 4, 6}}, kF64), 0);
  EXPECT_EQ(matmul(rnd({0, 2, 3}), rnd({3})).shape(), (Shape{0, 2}));
  // Gradients through an empty contraction are zeros of the input shapes.
  Tensor a = rnd({2, 0}, DType::Float64, true), b = rnd({0, 3}, DType::Float64, true);
  mm(a, b).sum().backward();
  EXPECT_EQ(a.grad().shape(), (Shape{2, 0}));
  EXPECT_EQ(b.grad().shape(), (Shape{0, 3}));
}

// ---------------------------------------------------------------- gradients

TEST(Linalg, MatmulGradcheckEveryRankCombination) {
  const std::vector<std::pair<Shape, Shape>> cases = {{{4}, {4}},
                                                      {{4}, {4, 3}},
                                                      {{2, 4}, {4}},
                                                      {{2, 4}, {4, 3}},
                                                      {{2, 3, 4}, {4, 2}},
                                                      {{3, 4}, {2, 4, 2}},
                                                      {{2, 3, 4}, {2, 4, 2}},
                                                      {{4}, {2, 4, 3}},
                                                      {{2, 3, 4}, {4}},
                                                      {{2, 1, 3, 4}, {2, 4, 2}},
                                                      {{1, 3, 4}, {2, 4, 2}},
                                                      {{2, 3, 4}, {1, 1, 4, 2}}};
  for (const auto& [sa, sb] : cases) {
    SCOPED_TRACE(shape_str(sa) + " x " + shape_str(sb));
    check_grad([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
               {rnd(sa, DType::Float64, true), rnd(sb, DType::Float64, true)});
  }
}

TEST(Linalg, GradcheckThroughViews) {
  Tensor a = rnd({4, 3}, DType::Float64, true), b = rnd({5, 4}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].t()); }, {a, b});
  Tensor c = rnd({3, 6}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return mm(in[0].slice(1, 0, 6, 2), in[0].slice(1, 1, 4).t()); }, {c});
  Tensor x = rnd({3, 4, 2}, DType::Float64, true), w = rnd({5, 4}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return matmul(in[0].transpose(1, 2), in[1].t()); }, {x, w});
}

TEST(Linalg, OtherOpsGradcheck) {
  Tensor a = rnd({3, 4}, DType::Float64, true), b = rnd({4, 2}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return mm(in[0], in[1]); }, {a, b});
  Tensor p = rnd({2, 3, 4}, DType::Float64, true), q = rnd({2, 4, 2}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return bmm(in[0], in[1]); }, {p, q});
  for (Shape bs : {Shape{2}, Shape{3, 1}, Shape{3, 2}, Shape{}}) {
    Tensor bias = rnd(bs, DType::Float64, true);
    check_grad([](const std::vector<Tensor>& in) { return addmm(in[0], in[1], in[2], 0.7, -1.3); }, {bias, a, b});
  }
  Tensor u = rnd({3}, DType::Float64, true), v = rnd({5}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return outer(in[0], in[1]); }, {u, v});
  Tensor w = rnd({3}, DType::Float64, true);
  check_grad([](const std::vector<Tensor>& in) { return dot(in[0], in[1]); }, {u, w});
  // Only one input requiring grad.
  Tensor c = rnd({4, 2});
  check_grad([c](const std::vector<Tensor>& in) { return matmul(in[0], c); }, {a});
}

TEST(Linalg, Float32BackwardMatchesFloat64) {
  Tensor a64 = rnd({5, 7, 6}), b64 = rnd({6, 4});
  Tensor a = a64.to(DType::Float32).requires_grad_(), b = b64.to(DType::Float32).requires_grad_();
  matmul(a, b).sum().backward();
  Tensor ones_g = ones({5, 7, 4}, kF64);
  expect_close(a.grad(), ref_matmul(ones_g, b64.t().contiguous()), 1e-4);
  Tensor ga = ref_matmul(a64.reshape({35, 6}).t().contiguous(), ones_g.reshape({35, 4}));
  expect_close(b.grad(), ga, 1e-3);
}

// ---------------------------------------------------------------- errors

TEST(Linalg, Errors) {
  expect_error(
      [] {
        matmul(zeros({64, 576}), zeros({512, 10}));
      },
      "matmul", "shapes [64, 576] and [512, 10] cannot be multiplied (576 != 512)");
  expect_error([] { matmul(zeros({3}, {.dtype = DType::Int64}), zeros({3}, {.dtype = DType::Int64})); }, "matmul",
               "int64");
  expect_error(
      [] {
        matmul(zeros({2, 2}, {.dtype = DType::Int32}), zeros({2, 2}, {.dtype = DType::Int32}));
      },
      "matmul", "float32 or float64");
  expect_error([] { matmul(zeros({2, 2}), zeros({2, 2}, kF64)); }, "matmul", "same dtype");
  expect_error([] { matmul(zeros({}), zeros({2})); }, "matmul", "at least 1 dim");
  expect_error([] { matmul(zeros({3}), zeros({4})); }, "matmul", "3 != 4");
  expect_error([] { matmul(zeros({3}), zeros({4, 2})); }, "matmul", "3 != 4");
  expect_error([] { matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); }, "matmul", "broadcast");
  expect_error([] { mm(zeros({2, 3, 4}), zeros({4, 5})); }, "mm", "2-D");
  expect_error([] { mm(zeros({2, 3}), zeros({4, 5})); }, "mm", "3 != 4");
  expect_error([] { bmm(zeros({2, 3}), zeros({3, 5})); }, "bmm", "3-D");
  expect_error([] { bmm(zeros({2, 3, 4}), zeros({3, 4, 5})); }, "bmm", "batch");
  expect_error([] { bmm(zeros({2, 3, 4}), zeros({2, 5, 5})); }, "bmm", "4 != 5");
  expect_error([] { addmm(zeros({3}), zeros({2, 4}), zeros({4, 5})); }, "addmm", "bias");
  expect_error([] { addmm(zeros({5}), zeros({2, 4}), zeros({3, 5})); }, "addmm", "4 != 3");
  expect_error([] { addmm(zeros({5}, kF64), zeros({2, 4}), zeros({4, 5})); }, "addmm", "dtype");
  expect_error([] { addmm(zeros({5}), zeros({4}), zeros({4, 5})); }, "addmm", "2-D");
  expect_error([] { outer(zeros({2, 2}), zeros({2})); }, "outer", "1-D");
  expect_error([] { dot(zeros({2}), zeros({3})); }, "dot", "2 != 3");
  expect_error([] { dot(zeros({2, 1}), zeros({2})); }, "dot", "1-D");
  expect_error([] { dot(zeros({2}, {.dtype = DType::Int64}), zeros({2}, {.dtype = DType::Int64})); }, "dot", "int64");
  expect_error([] { matmul(Tensor(), zeros({2})); }, "matmul", "undefined");
}
