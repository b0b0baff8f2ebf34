// max_pool2d (values and indices), avg_pool2d and adaptive_avg_pool2d: hand-computed cases, the
// tie and NaN rules (the first maximum wins, the last NaN of a window wins) on the interior and the
// border windows, ceil_mode's output size, and every argument error. Random geometries (padding,
// stride, ceil_mode, count_include_pad) against a composition of other ops, values, indices and
// gradients, on every backend, and the finite differences are op-table rows
// (tests/ops/op_rows_pooling.cpp).
#include <array>
#include <functional>
#include <limits>

#include "core/nn_kernels.h"
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

TEST(MaxPool2d, HandComputed) {
  Tensor x = arange(0, 16, 1, {}).reshape({1, 1, 4, 4});
  auto [y, idx] = max_pool2d_with_indices(x, Pool2dParams{});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{5, 7, 13, 15}));
  EXPECT_EQ(max_pool2d(x, 2).to_vector<float>(), (std::vector<float>{5, 7, 13, 15}));
  // 3x3 window, stride 1, padding 1 on a 2x2 input: every window sees the whole input.
  Pool2dParams p;
  p.kernel = {3, 3}, p.stride = {1, 1}, p.padding = {1, 1};
  Tensor z = tensor({{1, 4}, {3, 2}}).reshape({1, 2, 2});  // 3-D input [C, H, W]
  auto [zy, zi] = max_pool2d_with_indices(z, p);
  EXPECT_EQ(zy.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(zy.to_vector<float>(), (std::vector<float>{4, 4, 4, 4}));
  EXPECT_EQ(zi.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(MaxPool2d, TiesTakeTheFirstAndGradientGoesThere) {
  Tensor x = ones({1, 1, 2, 4}, {.dtype = DType::Float64, .requires_grad = true});
  auto [y, idx] = max_pool2d_with_indices(x, Pool2dParams{});
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{0, 2}));
  y.sum().backward();
  EXPECT_EQ(vec(x.grad()), (std::vector<double>{1, 0, 1, 0, 0, 0, 0, 0}));
  // Overlapping windows route each output's gradient to its own argmax (here the same element).
  Tensor z = tensor({{0, 9, 0}}, {.dtype = DType::Float64, .requires_grad = true});
  Pool2dParams p;
  p.kernel = {1, 2}, p.stride = {1, 1};
  max_pool2d(z.reshape({1, 1, 1, 3}), p).sum().backward();
  EXPECT_EQ(vec(z.grad()), (std::vector<double>{0, 2, 0}));
}

TEST(MaxPool2d, NaNPropagates) {
  Tensor x = tensor({1, NAN, 3, 4}).reshape({1, 1, 2, 2});
  EXPECT_TRUE(std::isnan(max_pool2d(x, 2).item()));
}

namespace {

// Checks max_pool2d_with_indices of planes `v` [P, H, W] against the rule, window by window:
// the first maximum in row-major window order, a NaN beating everything (the last NaN of the
// window), as PyTorch. `window(oh, ow)` gives the window's rows [h0, h1) and columns [w0, w1),
// clipped to the plane.
void expect_max_pool_rule(const std::vector<double>& v, int64_t P, int64_t H, int64_t W, const Tensor& y,
                          const Tensor& idx, const std::function<std::array<int64_t, 4>(int64_t, int64_t)>& window) {
  const int64_t OH = y.size(2), OW = y.size(3);
  std::vector<double> got = vec(y);
  std::vector<int64_t> gi = idx.to_vector<int64_t>();
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const auto [h0, h1, w0, w1] = window(oh, ow);
        double best = -INFINITY;
        int64_t bi = -1;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) {
            const double e = v[p * H * W + ih * W + iw];
            if (bi < 0 || e > best || std::isnan(e)) best = e, bi = ih * W + iw;
          }
        const size_t o = static_cast<size_t>((p * OH + oh) * OW + ow);
        EXPECT_EQ(gi[o], bi) << "plane " << p << ", output " << oh << "," << ow;
        if (std::isnan(best))
          EXPECT_TRUE(std::isnan(got[o]));
        else
          EXPECT_EQ(got[o], best);
      }
}

}  // namespace

TEST(MaxPool2d, InteriorAndBorderWindowsKeepTheTieAndNaNRules) {
  // 3x3/2 with padding 1 on 7x9 (the ResNet stem's geometry): interior windows run the
  // vectorised path, border windows the general loop. Values with many ties and a few NaNs;
  // expected: the first maximum in row-major window order, a NaN beating everything (the last
  // NaN of the window), as PyTorch.
  const int64_t H = 7, W = 9, OH = 4, OW = 5;
  std::vector<double> v(H * W);
  for (int64_t i = 0; i < H * W; ++i) v[i] = static_cast<double>((i * 7) % 3);
  v[2 * W + 4] = NAN, v[2 * W + 5] = NAN, v[5 * W + 1] = NAN;
  Tensor x = from_vector(v, {1, 1, H, W});
  Pool2dParams p;
  p.kernel = {3, 3}, p.stride = {2, 2}, p.padding = {1, 1};
  auto [y, idx] = max_pool2d_with_indices(x, p);
  ASSERT_EQ(y.shape(), (Shape{1, 1, OH, OW}));
  expect_max_pool_rule(v, 1, H, W, y, idx, [&](int64_t oh, int64_t ow) {
    return std::array<int64_t, 4>{std::max<int64_t>(0, 2 * oh - 1), std::min(H, 2 * oh + 2),
                                  std::max<int64_t>(0, 2 * ow - 1), std::min(W, 2 * ow + 2)};
  });
}

TEST(MaxPool2d, TwoByTwoWindowsKeepTheTieAndNaNRulesOnRowsOfAnyWidth) {
  // 2x2/2 without padding, the MNIST geometry, in float32: rows of 37 outputs (two blocks of 16
  // and a remainder of 5 at the avx512 level), an odd input width and height (the last column and
  // row belong to no window), ties, maxima in either row of a window, a few NaNs, two planes.
  const int64_t H = 9, W = 75, OH = 4, OW = 37, P = 2;
  std::vector<double> v(P * H * W);
  for (int64_t i = 0; i < P * H * W; ++i) v[i] = static_cast<double>((i * 37 + i / 7) % 11);
  v[2 * W + 4] = NAN, v[3 * W + 5] = NAN, v[2 * W + 41] = NAN, v[H * W + 6 * W + 70] = NAN, v[H * W + 7 * W + 71] = NAN;
  Pool2dParams p2;
  p2.kernel = {2, 2}, p2.stride = {2, 2};
  auto [y, idx] = max_pool2d_with_indices(from_vector(v, {1, P, H, W}).to(DType::Float32), p2);
  ASSERT_EQ(y.shape(), (Shape{1, P, OH, OW}));
  expect_max_pool_rule(v, P, H, W, y, idx, [](int64_t oh, int64_t ow) {
    return std::array<int64_t, 4>{2 * oh, 2 * oh + 2, 2 * ow, 2 * ow + 2};
  });
}

TEST(MaxPool2d, TwoByTwoGradientGoesToEachWindowsArgmaxOnly) {
  // The backward kernel of the same geometry in float32, called through its stub with a gradient
  // buffer full of NaN: every output's gradient lands on its argmax and every other element, the
  // uncovered last column and row included, is zero. Then the same with one index moved out of its
  // window. (A kernel that wrote each window's four gradients directly caught three mutations
  // here, and ran at 20-21 GB/s against this scatter's 37-38 in bench/layers: not kept.)
  const int64_t H = 9, W = 75, OH = 4, OW = 37, P = 2;
  std::vector<double> v(P * H * W), gv(P * OH * OW);
  for (int64_t i = 0; i < P * H * W; ++i) v[i] = static_cast<double>((i * 37 + i / 7) % 11);
  for (int64_t i = 0; i < P * OH * OW; ++i) gv[i] = 1.0 + static_cast<double>(i);
  Pool2dParams p2;
  p2.kernel = {2, 2}, p2.stride = {2, 2};
  auto [y, idx] = max_pool2d_with_indices(from_vector(v, {1, P, H, W}).to(DType::Float32), p2);
  Tensor go = from_vector(gv, {1, P, OH, OW}).to(DType::Float32);
  Pool2dGeometry g;
  g.P = P, g.H = H, g.W = W, g.OH = OH, g.OW = OW, g.kh = g.kw = g.sh = g.sw = 2;
  for (bool moved : {false, true}) {
    std::vector<int64_t> at = idx.to_vector<int64_t>();
    if (moved) at[P * OH * OW - 3] = 0;  // the last plane's third-last output: to the plane's first element
    Tensor ix = from_vector(at, {1, P, OH, OW});
    Tensor gi = full({1, P, H, W}, NAN, {.dtype = DType::Float32});
    max_pool2d_backward_stub(Device::cpu())(gi, go, ix, g);
    std::vector<double> want(P * H * W, 0.0);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t o = 0; o < OH * OW; ++o) want[p * H * W + at[p * OH * OW + o]] += gv[p * OH * OW + o];
    EXPECT_EQ(vec(gi), want) << (moved ? "an index outside its window" : "indices from the forward");
  }
}

TEST(MaxPool2d, CeilModeOutputSize) {
  // 6 wide, kernel 2, stride 4, padding 1: ceil would give 3 windows, but the third would start
  // at 7 >= 6 + 1 (past the input and its left padding), so PyTorch keeps 2.
  Pool2dParams p;
  p.kernel = {2, 2}, p.stride = {4, 4}, p.padding = {1, 1}, p.ceil_mode = true;
  EXPECT_EQ(max_pool2d(zeros({1, 1, 6, 6}), p).shape(), (Shape{1, 1, 2, 2}));
  Pool2dParams q;
  q.kernel = {2, 2}, q.ceil_mode = true;
  EXPECT_EQ(max_pool2d(zeros({1, 1, 5, 5}), q).shape(), (Shape{1, 1, 3, 3}));
  q.ceil_mode = false;
  EXPECT_EQ(max_pool2d(zeros({1, 1, 5, 5}), q).shape(), (Shape{1, 1, 2, 2}));
}

TEST(AvgPool2d, HandComputedCountIncludePad) {
  Pool2dParams p;
  p.kernel = {3, 3}, p.stride = {1, 1}, p.padding = {1, 1};
  Tensor x = ones({1, 1, 2, 2});
  for (float v : avg_pool2d(x, p).to_vector<float>()) EXPECT_FLOAT_EQ(v, 4.0f / 9.0f);
  p.count_include_pad = false;
  for (float v : avg_pool2d(x, p).to_vector<float>()) EXPECT_FLOAT_EQ(v, 1.0f);
  // ceil_mode's extra window hangs over the right edge: it divides by the part of it inside the
  // padded input (no padding here, so the one remaining column), as PyTorch.
  Pool2dParams c;
  c.kernel = {1, 2}, c.ceil_mode = true;
  Tensor r = tensor({1, 2, 3, 4, 5}).reshape({1, 1, 1, 5});
  EXPECT_EQ(avg_pool2d(r, c).to_vector<float>(), (std::vector<float>{1.5f, 3.5f, 5.0f}));
}

TEST(AdaptiveAvgPool2d, HandComputed) {
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5) (they overlap).
  Tensor x = tensor({1, 2, 3, 4, 5}, {.dtype = DType::Float64}).reshape({1, 1, 1, 5});
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, {1, 3}), {1.5, 3.0, 4.5}));
  // 2 -> 5: upsampling windows of one element each (some repeated).
  Tensor u = tensor({1, 2}, {.dtype = DType::Float64}).reshape({1, 1, 2, 1});
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(u, {5, 1}), {1, 1, 1.5, 2, 2}));
}

TEST(Pool2d, Empty) {
  EXPECT_EQ(avg_pool2d(zeros({0, 3, 4, 4}), Pool2dParams{}).shape(), (Shape{0, 3, 2, 2}));
}

TEST(Pool2d, Errors) {
  Tensor x = zeros({1, 1, 4, 4});
  expect_error([&] { max_pool2d(zeros({4, 4}), 2); }, {"max_pool2d", "3-D [C, H, W] or 4-D", "[4, 4]"});
  expect_error(
      [&] {
        avg_pool2d(zeros({1, 1, 4, 4}, {.dtype = DType::Int32}), Pool2dParams{});
      },
      {"avg_pool2d", "float32 or float64"});
  Pool2dParams p;
  p.kernel = {0, 2};
  expect_error([&] { max_pool2d(x, p); }, {"max_pool2d", "kernel size must be positive"});
  p.kernel = {2, 2}, p.stride = {-1, 1};
  expect_error([&] { avg_pool2d(x, p); }, {"avg_pool2d", "stride must be positive"});
  p.stride = {0, 0}, p.padding = {-1, 0};
  expect_error([&] { max_pool2d(x, p); }, {"max_pool2d", "padding must be non-negative"});
  p.padding = {2, 0};
  expect_error([&] { max_pool2d(x, p); }, {"max_pool2d", "at most half of the kernel size"});
  expect_error([&] { max_pool2d(zeros({1, 1, 2, 2}), 3); }, {"max_pool2d", "output size", "too small"});
  expect_error([&] { max_pool2d(zeros({1, 1, 0, 2}), 1); }, {"max_pool2d", "spatial size must be non-zero"});
  expect_error([&] { adaptive_avg_pool2d(x, {0, 2}); }, {"adaptive_avg_pool2d", "output size must be positive"});
  expect_error([&] { adaptive_avg_pool2d(zeros({2, 2, 2, 2, 2}), {1, 1}); }, {"adaptive_avg_pool2d", "4-D"});
}
