// max_pool2d (values and indices), avg_pool2d and adaptive_avg_pool2d: hand-computed cases,
// random geometries (padding, stride, ceil_mode, count_include_pad) against direct float64 loops
// for values and gradients, gradchecks and errors.
#include <limits>
#include <random>

#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

namespace {

struct PoolCfg {
  int64_t P = 1, H = 5, W = 5, kh = 2, kw = 2, sh = 2, sw = 2, ph = 0, pw = 0;
  bool ceil = false, include_pad = true;
};

Pool2dParams params(const PoolCfg& c) {
  Pool2dParams p;
  p.kernel = {c.kh, c.kw};
  p.stride = {c.sh, c.sw};
  p.padding = {c.ph, c.pw};
  p.ceil_mode = c.ceil;
  p.count_include_pad = c.include_pad;
  return p;
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - k) / static_cast<double>(s);
  int64_t out = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;  // the last window must start inside input or left padding
  return out;
}

struct PoolRef {
  int64_t OH, OW;
  std::vector<double> y, idx, gx;
};

// Direct loops; kind 0 = max, 1 = avg.
PoolRef naive_pool(const std::vector<double>& x, const std::vector<double>& gy, const PoolCfg& c, int kind) {
  PoolRef r;
  r.OH = out_size(c.H, c.kh, c.sh, c.ph, c.ceil);
  r.OW = out_size(c.W, c.kw, c.sw, c.pw, c.ceil);
  r.gx.assign(x.size(), 0.0);
  for (int64_t p = 0; p < c.P; ++p)
    for (int64_t oh = 0; oh < r.OH; ++oh)
      for (int64_t ow = 0; ow < r.OW; ++ow) {
        const size_t oi = static_cast<size_t>((p * r.OH + oh) * r.OW + ow);
        double best = -INFINITY, sum = 0;
        int64_t bi = -1, inside = 0, padded = 0;
        for (int64_t i = 0; i < c.kh; ++i)
          for (int64_t j = 0; j < c.kw; ++j) {
            const int64_t ih = oh * c.sh - c.ph + i, iw = ow * c.sw - c.pw + j;
            if (ih < c.H + c.ph && iw < c.W + c.pw) ++padded;  // inside the padded input
            if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
            ++inside;
            const double v = x[static_cast<size_t>((p * c.H + ih) * c.W + iw)];
            sum += v;
            if (bi < 0 || v > best) best = v, bi = ih * c.W + iw;
          }
        if (kind == 0) {
          r.y.push_back(best);
          r.idx.push_back(static_cast<double>(bi));
          if (!gy.empty()) r.gx[static_cast<size_t>(p * c.H * c.W + bi)] += gy[oi];
        } else {
          const double div = static_cast<double>(c.include_pad ? padded : inside);
          r.y.push_back(sum / div);
          if (!gy.empty())
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                const int64_t ih = oh * c.sh - c.ph + i, iw = ow * c.sw - c.pw + j;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                r.gx[static_cast<size_t>((p * c.H + ih) * c.W + iw)] += gy[oi] / div;
              }
        }
      }
  return r;
}

PoolCfg random_pool(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (;;) {
    PoolCfg c;
    c.P = pick(1, 4), c.H = pick(1, 9), c.W = pick(1, 9);
    c.kh = pick(1, 4), c.kw = pick(1, 4), c.sh = pick(1, 3), c.sw = pick(1, 3);
    c.ph = pick(0, static_cast<int>(c.kh / 2)), c.pw = pick(0, static_cast<int>(c.kw / 2));
    c.ceil = pick(0, 1) == 1, c.include_pad = pick(0, 1) == 1;
    if (out_size(c.H, c.kh, c.sh, c.ph, c.ceil) > 0 && out_size(c.W, c.kw, c.sw, c.pw, c.ceil) > 0) return c;
  }
}

std::string describe(const PoolCfg& c) {
  std::ostringstream os;
  os << "P" << c.P << " " << c.H << "x" << c.W << " k" << c.kh << "," << c.kw << " s" << c.sh << "," << c.sw << " p"
     << c.ph << "," << c.pw << (c.ceil ? " ceil" : "") << (c.include_pad ? " include_pad" : "");
  return os.str();
}

void check_pool(const PoolCfg& c, int kind, DType dt, uint64_t seed) {
  SCOPED_TRACE(describe(c) + (kind == 0 ? " max" : " avg"));
  Tensor x = randn_t({c.P, 1, c.H, c.W}, seed, dt, true);
  Tensor y, idx;
  if (kind == 0) {
    std::tie(y, idx) = max_pool2d_with_indices(x, params(c));
  } else {
    y = avg_pool2d(x, params(c));
  }
  Tensor gy = randn_t(y.shape(), seed + 1, dt);
  y.backward(gy);
  PoolRef r = naive_pool(vec(x), vec(gy), c, kind);
  ASSERT_EQ(y.shape(), (Shape{c.P, 1, r.OH, r.OW}));
  const double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
  EXPECT_TRUE(all_close(y, r.y, tol, tol));
  if (kind == 0) {
    EXPECT_EQ(idx.dtype(), DType::Int64);
    EXPECT_EQ(vec(idx), r.idx);
  }
  EXPECT_TRUE(all_close(x.grad(), r.gx, tol, tol));
}

}  // namespace

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
  std::vector<double> got = vec(y);
  std::vector<int64_t> gi = idx.to_vector<int64_t>();
  for (int64_t oh = 0; oh < OH; ++oh)
    for (int64_t ow = 0; ow < OW; ++ow) {
      double best = -INFINITY;
      int64_t bi = -1;
      for (int64_t ih = std::max<int64_t>(0, 2 * oh - 1); ih < std::min(H, 2 * oh + 2); ++ih)
        for (int64_t iw = std::max<int64_t>(0, 2 * ow - 1); iw < std::min(W, 2 * ow + 2); ++iw) {
          const double e = v[ih * W + iw];
          if (bi < 0 || e > best || std::isnan(e)) best = e, bi = ih * W + iw;
        }
      const size_t o = static_cast<size_t>(oh * OW + ow);
      EXPECT_EQ(gi[o], bi) << "output " << oh << "," << ow;
      if (std::isnan(best))
        EXPECT_TRUE(std::isnan(got[o]));
      else
        EXPECT_EQ(got[o], best);
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

TEST(MaxPool2d, RandomGeometriesMatchDirectLoops) {
  std::mt19937 rng(3);
  for (int i = 0; i < 60; ++i) check_pool(random_pool(rng), 0, DType::Float64, 10 + i);
  for (int i = 0; i < 10; ++i) check_pool(random_pool(rng), 0, DType::Float32, 100 + i);
  PoolCfg mnist;  // the 2x2/2 fast path, odd size (last row and column dropped)
  mnist.P = 6, mnist.H = 13, mnist.W = 11;
  check_pool(mnist, 0, DType::Float32, 7);
  check_pool(mnist, 0, DType::Float64, 8);
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

TEST(AvgPool2d, RandomGeometriesMatchDirectLoops) {
  std::mt19937 rng(5);
  for (int i = 0; i < 60; ++i) check_pool(random_pool(rng), 1, DType::Float64, 200 + i);
  for (int i = 0; i < 10; ++i) check_pool(random_pool(rng), 1, DType::Float32, 300 + i);
}

TEST(AdaptiveAvgPool2d, HandComputedAndRandom) {
  // 5 -> 3: windows [0, 2), [1, 4), [3, 5) (they overlap).
  Tensor x = tensor({1, 2, 3, 4, 5}, {.dtype = DType::Float64}).reshape({1, 1, 1, 5});
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(x, {1, 3}), {1.5, 3.0, 4.5}));
  // 2 -> 5: upsampling windows of one element each (some repeated).
  Tensor u = tensor({1, 2}, {.dtype = DType::Float64}).reshape({1, 1, 2, 1});
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(u, {5, 1}), {1, 1, 1.5, 2, 2}));
  std::mt19937 rng(9);
  for (int it = 0; it < 30; ++it) {
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    const int64_t P = pick(1, 3), H = pick(1, 9), W = pick(1, 9), OH = pick(1, 6), OW = pick(1, 6);
    Tensor xi = randn_t({P, H, W}, 40 + it, DType::Float64, true);
    Tensor y = adaptive_avg_pool2d(xi, {OH, OW});
    Tensor gy = randn_t(y.shape(), 80 + it, DType::Float64);
    y.backward(gy);
    std::vector<double> xv = vec(xi), gyv = vec(gy), ref, gref(xv.size(), 0.0);
    for (int64_t p = 0; p < P; ++p)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t h0 = static_cast<int64_t>(std::floor(static_cast<double>(oh * H) / OH));
          const int64_t h1 = static_cast<int64_t>(std::ceil(static_cast<double>((oh + 1) * H) / OH));
          const int64_t w0 = static_cast<int64_t>(std::floor(static_cast<double>(ow * W) / OW));
          const int64_t w1 = static_cast<int64_t>(std::ceil(static_cast<double>((ow + 1) * W) / OW));
          double s = 0;
          const double cnt = static_cast<double>((h1 - h0) * (w1 - w0));
          for (int64_t i = h0; i < h1; ++i)
            for (int64_t j = w0; j < w1; ++j) {
              s += xv[static_cast<size_t>((p * H + i) * W + j)];
              gref[static_cast<size_t>((p * H + i) * W + j)] += gyv[static_cast<size_t>((p * OH + oh) * OW + ow)] / cnt;
            }
          ref.push_back(s / cnt);
        }
    EXPECT_TRUE(all_close(y, ref, 1e-12, 1e-12));
    EXPECT_TRUE(all_close(xi.grad(), gref, 1e-12, 1e-12));
  }
}

TEST(Pool2d, Gradcheck) {
  Tensor x = randn_t({2, 2, 5, 6}, 1, DType::Float64, true);
  for (bool ceil : {false, true})
    for (bool inc : {false, true}) {
      Pool2dParams p;
      p.kernel = {3, 2}, p.stride = {2, 2}, p.padding = {1, 1}, p.ceil_mode = ceil, p.count_include_pad = inc;
      EXPECT_TRUE(grad_ok([p](const std::vector<Tensor>& in) { return avg_pool2d(in[0], p); }, {x}));
      EXPECT_TRUE(grad_ok([p](const std::vector<Tensor>& in) { return max_pool2d(in[0], p); }, {x}));
    }
  EXPECT_TRUE(grad_ok([](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {3, 4}); }, {x}));
  EXPECT_TRUE(grad_ok([](const std::vector<Tensor>& in) { return max_pool2d(in[0], 2); }, {x}));
}

TEST(Pool2d, NonContiguousAndEmpty) {
  Tensor base = randn_t({1, 2, 6, 4}, 2, DType::Float64);
  Tensor x = base.transpose(2, 3);
  EXPECT_TRUE(all_close(max_pool2d(x, 2), vec(max_pool2d(x.contiguous(), 2)), 0, 0));
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
