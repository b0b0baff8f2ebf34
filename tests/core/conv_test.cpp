// conv2d and conv_transpose2d: hand-computed values, an empty batch, which gradients are computed,
// and every argument error. Every geometry (stride, padding, dilation, groups, same padding,
// output_padding and the kernels' paths) against a composition of other ops, on every backend,
// and the finite differences are op-table rows (tests/ops/op_rows_conv.cpp).
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

TEST(Conv2d, HandComputedSumOfWindows) {
  // 3x3 input 1..9, 2x2 kernel of ones: each output is its window's sum; bias 0.5.
  Tensor x = arange(1, 10, 1, {.dtype = DType::Float32}).reshape({1, 1, 3, 3});
  Tensor y = conv2d(x, ones({1, 1, 2, 2}), tensor({0.5}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12.5f, 16.5f, 24.5f, 28.5f}));
  // Padding 1, stride 2: corners see only their own 2x2 quadrant ({1}, {2,3}, {4,7}, {5,6,8,9}).
  Conv2dParams p;
  p.padding = {1, 1};
  p.stride = {2, 2};
  EXPECT_EQ(conv2d(x, ones({1, 1, 2, 2}), Tensor(), p).to_vector<float>(), (std::vector<float>{1, 5, 11, 28}));
}

TEST(Conv2d, EmptyBatch) {
  Tensor e = zeros({0, 3, 5, 5}, {.dtype = DType::Float64});
  Tensor we = randn_t({2, 3, 3, 3}, 13, DType::Float64, true);
  Tensor be = randn_t({2}, 14, DType::Float64, true);
  Tensor ye = conv2d(e, we, be);
  EXPECT_EQ(ye.shape(), (Shape{0, 2, 3, 3}));
  ye.sum().backward();
  EXPECT_EQ(vec(we.grad()), std::vector<double>(54, 0.0));
  EXPECT_EQ(vec(be.grad()), std::vector<double>(2, 0.0));
}

TEST(Conv2d, OnlyRequestedGradients) {
  Tensor x = randn_t({2, 2, 5, 5}, 1, DType::Float64);
  Tensor w = randn_t({3, 2, 3, 3}, 2, DType::Float64, true);
  conv2d(x, w).sum().backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(w.grad().defined());
  EXPECT_EQ(conv2d(x, w).grad_fn()->name(), "Conv2dBackward");
}

TEST(Conv2d, Errors) {
  Tensor x = zeros({2, 3, 8, 8});
  Tensor w = zeros({32, 1, 3, 3});
  expect_error([&] { conv2d(x, w); },
               {"conv2d: input has 3 channels but weight expects 1 (weight shape [32, 1, 3, 3])"});
  expect_error([&] { conv2d(zeros({3, 8, 8}), w); }, {"conv2d", "4-D input", "[3, 8, 8]"});
  expect_error([&] { conv2d(x, zeros({4, 3, 3})); }, {"conv2d", "4-D weight"});
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}, {.dtype = DType::Float64})); }, {"conv2d", "weight dtype float64"});
  expect_error(
      [&] {
        conv2d(zeros({2, 3, 8, 8}, {.dtype = DType::Int64}), w);
      },
      {"conv2d", "float64, float16 or bfloat16"});
  Conv2dParams g;
  g.groups = 2;
  expect_error([&] { conv2d(x, zeros({4, 1, 3, 3}), Tensor(), g); }, {"conv2d", "groups (2) must divide", "3"});
  expect_error(
      [&] {
        conv2d(zeros({1, 4, 8, 8}), zeros({3, 2, 3, 3}), Tensor(), g);
      },
      {"conv2d", "must divide the weight's 3 output channels"});
  g.groups = 0;
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), Tensor(), g); }, {"conv2d", "groups must be positive"});
  expect_error([&] { conv2d(x, zeros({4, 3, 9, 3})); }, {"conv2d", "kernel size 9x3", "larger than the padded input"});
  Conv2dParams d;
  d.dilation = {4, 1};
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), Tensor(), d); }, {"conv2d", "(dilated)"});
  Conv2dParams neg;
  neg.padding = {-1, 0};
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), Tensor(), neg); }, {"conv2d", "padding must be non-negative"});
  Conv2dParams st;
  st.stride = {0, 1};
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), Tensor(), st); }, {"conv2d", "stride must be positive"});
  Conv2dParams same;
  same.same_padding = true;
  same.stride = {2, 2};
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), Tensor(), same); }, {"conv2d", "same padding needs stride 1"});
  same.stride = {1, 1};
  same.padding = {1, 1};
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), Tensor(), same); }, {"conv2d", "cannot both be given"});
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}), zeros({3})); }, {"conv2d", "bias must have shape [4]", "[3]"});
  expect_error([&] { conv2d(x, zeros({4, 3, 0, 3})); }, {"conv2d", "kernel size must be positive"});
  expect_error([&] { conv2d(Tensor(), w); }, {"conv2d", "undefined"});
}

TEST(ConvTranspose2d, HandComputed) {
  // Stride 2, 2x2 kernel of ones: each input pixel becomes a 2x2 block (no overlap).
  Tensor x = tensor({{1, 2}, {3, 4}}).reshape({1, 1, 2, 2});
  ConvTranspose2dParams p;
  p.stride = {2, 2};
  Tensor y = conv_transpose2d(x, ones({1, 1, 2, 2}), Tensor(), p);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // Stride 1, 2x2 ones: overlapping blocks add up; output_padding needs stride > 1.
  Tensor z = conv_transpose2d(x, ones({1, 1, 2, 2}), tensor({1}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 4, 3, 5, 11, 7, 4, 8, 5}));
}

TEST(ConvTranspose2d, Errors) {
  Tensor x = zeros({1, 3, 4, 4});
  expect_error(
      [&] {
        conv_transpose2d(x, zeros({2, 4, 3, 3}));
      },
      {"conv_transpose2d: input has 3 channels but weight expects 2"});
  ConvTranspose2dParams p;
  p.output_padding = {1, 0};
  expect_error(
      [&] {
        conv_transpose2d(x, zeros({3, 4, 3, 3}), Tensor(), p);
      },
      {"conv_transpose2d", "output_padding [1, 0] must be smaller"});
  p.output_padding = {0, 0};
  p.padding = {3, 3};
  expect_error(
      [&] {
        conv_transpose2d(zeros({1, 3, 1, 1}), zeros({3, 4, 3, 3}), Tensor(), p);
      },
      {"conv_transpose2d", "output size", "is empty"});
  p.padding = {0, 0};
  p.groups = 2;
  expect_error([&] { conv_transpose2d(x, zeros({3, 4, 3, 3}), Tensor(), p); }, {"conv_transpose2d", "groups (2)"});
  expect_error(
      [&] {
        conv_transpose2d(x, zeros({3, 4, 3, 3}), zeros({5}));
      },
      {"conv_transpose2d", "bias must have shape [4]"});
  p.groups = 1;
  p.padding = {-1, 0};
  expect_error(
      [&] {
        conv_transpose2d(x, zeros({3, 4, 3, 3}), Tensor(), p);
      },
      {"conv_transpose2d", "padding must be non-negative"});
}
