// Matrix products: hand-computed values of matmul, mm, dot and outer, addmm with a broadcast bias
// and with beta = 0 (the bias ignored, NaN included), empty shapes and their gradients, and every
// argument error. The GEMM over odd sizes, every rank combination, strided, sliced, expanded and
// permuted operands against a composition of other ops, and the finite differences are op-table
// rows (tests/ops/op_rows_linalg.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

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

void expect_close(const Tensor& got, const Tensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol) << "element " << i;
}

}  // namespace

// ---------------------------------------------------------------- values

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

TEST(Linalg, AddmmValuesAndBetaZeroIgnoresTheBias) {
  Tensor a = tensor({{1, 2}, {3, 4}}, kF64), b = tensor({{5, 6}, {7, 8}}, kF64);
  // 0.5 * bias + 2 * a b with a row bias broadcast over the rows.
  expect_close(addmm(tensor({1, -1}, kF64), a, b, 0.5, 2.0), tensor({{38.5, 43.5}, {86.5, 99.5}}, kF64), 0);
  // beta = 0 ignores the bias, NaN included, as BLAS does.
  Tensor nan_bias = full({2, 2}, std::numeric_limits<double>::quiet_NaN(), kF64);
  expect_close(addmm(nan_bias, a, b, 0.0, 1.0), tensor({{19, 22}, {43, 50}}, kF64), 0);
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
      "matmul", "float64, float16 or bfloat16");
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
