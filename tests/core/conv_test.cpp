// conv2d and conv_transpose2d: forward values and all three gradients against direct float64
// loops over random geometries (stride, padding, dilation, groups incl. depthwise, same padding,
// output_padding, batched-chunk and pointwise paths), hand-computed cases, gradchecks and errors.
#include <random>

#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

namespace {

struct Cfg {
  int64_t N = 1, C = 1, H = 5, W = 5, OC = 1, KH = 3, KW = 3;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t oph = 0, opw = 0;  // conv_transpose2d only
  bool bias = true;
  bool same = false;  // conv2d only
};

std::string describe(const Cfg& c) {
  std::ostringstream os;
  os << "N" << c.N << " C" << c.C << " " << c.H << "x" << c.W << " OC" << c.OC << " k" << c.KH << "x" << c.KW << " s"
     << c.sh << "," << c.sw << " p" << c.ph << "," << c.pw << " d" << c.dh << "," << c.dw << " g" << c.groups << " op"
     << c.oph << "," << c.opw << (c.bias ? " bias" : "") << (c.same ? " same" : "");
  return os.str();
}

struct Ref {
  Shape yshape;
  std::vector<double> y, gx, gw, gb;
};

// Direct loops: y[n, oc, oh, ow] = b[oc] + sum x[n, c, oh*s - p + kh*d, ...] * w[oc, c', kh, kw].
Ref naive_conv(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
               const std::vector<double>& gy, const Cfg& c, int64_t ph, int64_t pw, int64_t OH, int64_t OW) {
  const int64_t Cg = c.C / c.groups, OCg = c.OC / c.groups;
  Ref r;
  r.yshape = {c.N, c.OC, OH, OW};
  r.y.assign(static_cast<size_t>(c.N * c.OC * OH * OW), 0.0);
  r.gx.assign(x.size(), 0.0);
  r.gw.assign(w.size(), 0.0);
  r.gb.assign(static_cast<size_t>(c.OC), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t oc = 0; oc < c.OC; ++oc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const size_t yi = static_cast<size_t>(((n * c.OC + oc) * OH + oh) * OW + ow);
          double acc = b.empty() ? 0.0 : b[oc];
          const double g = gy.empty() ? 0.0 : gy[yi];
          r.gb[oc] += g;
          const int64_t grp = oc / OCg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                const int64_t ih = oh * c.sh - ph + kh * c.dh, iw = ow * c.sw - pw + kw * c.dw;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                const size_t xi = static_cast<size_t>(((n * c.C + grp * Cg + ci) * c.H + ih) * c.W + iw);
                const size_t wi = static_cast<size_t>(((oc * Cg + ci) * c.KH + kh) * c.KW + kw);
                acc += x[xi] * w[wi];
                r.gx[xi] += g * w[wi];
                r.gw[wi] += g * x[xi];
              }
          r.y[yi] = acc;
        }
  return r;
}

// Direct scatter: y[n, oc, ih*s - p + kh*d, ...] += x[n, ic, ih, iw] * w[ic, oc', kh, kw].
Ref naive_conv_transpose(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b,
                         const std::vector<double>& gy, const Cfg& c) {
  const int64_t Cg = c.C / c.groups, OCg = c.OC / c.groups;
  const int64_t OH = (c.H - 1) * c.sh - 2 * c.ph + c.dh * (c.KH - 1) + c.oph + 1;
  const int64_t OW = (c.W - 1) * c.sw - 2 * c.pw + c.dw * (c.KW - 1) + c.opw + 1;
  Ref r;
  r.yshape = {c.N, c.OC, OH, OW};
  r.y.assign(static_cast<size_t>(c.N * c.OC * OH * OW), 0.0);
  r.gx.assign(x.size(), 0.0);
  r.gw.assign(w.size(), 0.0);
  r.gb.assign(static_cast<size_t>(c.OC), 0.0);
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t oc = 0; oc < c.OC; ++oc)
      for (int64_t i = 0; i < OH * OW; ++i) {
        const size_t yi = static_cast<size_t>((n * c.OC + oc) * OH * OW + i);
        if (!b.empty()) r.y[yi] = b[oc];
        if (!gy.empty()) r.gb[oc] += gy[yi];
      }
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ic = 0; ic < c.C; ++ic)
      for (int64_t ih = 0; ih < c.H; ++ih)
        for (int64_t iw = 0; iw < c.W; ++iw) {
          const size_t xi = static_cast<size_t>(((n * c.C + ic) * c.H + ih) * c.W + iw);
          const int64_t grp = ic / Cg;
          for (int64_t ocg = 0; ocg < OCg; ++ocg)
            for (int64_t kh = 0; kh < c.KH; ++kh)
              for (int64_t kw = 0; kw < c.KW; ++kw) {
                const int64_t oh = ih * c.sh - c.ph + kh * c.dh, ow = iw * c.sw - c.pw + kw * c.dw;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                const size_t yi = static_cast<size_t>(((n * c.OC + grp * OCg + ocg) * OH + oh) * OW + ow);
                const size_t wi = static_cast<size_t>(((ic * OCg + ocg) * c.KH + kh) * c.KW + kw);
                r.y[yi] += x[xi] * w[wi];
                if (!gy.empty()) {
                  r.gx[xi] += gy[yi] * w[wi];
                  r.gw[wi] += gy[yi] * x[xi];
                }
              }
        }
  return r;
}

Conv2dParams conv_params(const Cfg& c) {
  Conv2dParams p;
  p.stride = {c.sh, c.sw};
  p.padding = {c.ph, c.pw};
  p.dilation = {c.dh, c.dw};
  p.groups = c.groups;
  p.same_padding = c.same;
  return p;
}

ConvTranspose2dParams tconv_params(const Cfg& c) {
  ConvTranspose2dParams p;
  p.stride = {c.sh, c.sw};
  p.padding = {c.ph, c.pw};
  p.output_padding = {c.oph, c.opw};
  p.dilation = {c.dh, c.dw};
  p.groups = c.groups;
  return p;
}

// Runs forward and backward through Ember and compares output and all gradients with the loops.
void check_conv(const Cfg& c, DType dt, bool transpose, uint64_t seed) {
  SCOPED_TRACE(describe(c) + (transpose ? " transpose" : "") + (dt == DType::Float32 ? " f32" : " f64"));
  const int64_t Cg = c.C / c.groups, OCg = c.OC / c.groups;
  Shape wshape = transpose ? Shape{c.C, OCg, c.KH, c.KW} : Shape{c.OC, Cg, c.KH, c.KW};
  Tensor x = randn_t({c.N, c.C, c.H, c.W}, seed, dt, true);
  Tensor w = randn_t(wshape, seed + 1, dt, true);
  Tensor b = c.bias ? randn_t({c.OC}, seed + 2, dt, true) : Tensor();
  Tensor y = transpose ? conv_transpose2d(x, w, b, tconv_params(c)) : conv2d(x, w, b, conv_params(c));
  Tensor gy = randn_t(y.shape(), seed + 3, dt);
  y.backward(gy);
  std::vector<double> bv = c.bias ? vec(b) : std::vector<double>{};
  Ref r;
  if (transpose) {
    r = naive_conv_transpose(vec(x), vec(w), bv, vec(gy), c);
  } else {
    int64_t ph = c.ph, pw = c.pw, OH, OW;
    if (c.same) {
      ph = c.dh * (c.KH - 1) / 2, pw = c.dw * (c.KW - 1) / 2, OH = c.H, OW = c.W;
    } else {
      OH = (c.H + 2 * c.ph - c.dh * (c.KH - 1) - 1) / c.sh + 1;
      OW = (c.W + 2 * c.pw - c.dw * (c.KW - 1) - 1) / c.sw + 1;
    }
    r = naive_conv(vec(x), vec(w), bv, vec(gy), c, ph, pw, OH, OW);
  }
  const double tol = dt == DType::Float32 ? 2e-4 : 1e-11;
  ASSERT_EQ(y.shape(), r.yshape);
  EXPECT_TRUE(all_close(y, r.y, tol, tol));
  EXPECT_TRUE(all_close(x.grad(), r.gx, tol, tol));
  EXPECT_TRUE(all_close(w.grad(), r.gw, tol, tol));
  if (c.bias) {
    EXPECT_TRUE(all_close(b.grad(), r.gb, tol, tol));
  }
}

// A random valid geometry.
Cfg random_cfg(std::mt19937& rng, bool transpose) {
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (;;) {
    Cfg c;
    c.groups = pick(0, 3) == 0 ? pick(2, 3) : 1;
    c.N = pick(1, 3);
    c.C = c.groups * pick(1, 3);
    c.OC = c.groups * pick(1, 3);
    c.H = pick(1, 9), c.W = pick(1, 9);
    c.KH = pick(1, 4), c.KW = pick(1, 4);
    c.sh = pick(1, 3), c.sw = pick(1, 3);
    c.dh = pick(1, 2), c.dw = pick(1, 2);
    c.ph = pick(0, 2), c.pw = pick(0, 2);
    c.bias = pick(0, 1) == 1;
    if (transpose) {
      c.oph = pick(0, static_cast<int>(std::max(c.sh, c.dh) - 1));
      c.opw = pick(0, static_cast<int>(std::max(c.sw, c.dw) - 1));
      const int64_t OH = (c.H - 1) * c.sh - 2 * c.ph + c.dh * (c.KH - 1) + c.oph + 1;
      const int64_t OW = (c.W - 1) * c.sw - 2 * c.pw + c.dw * (c.KW - 1) + c.opw + 1;
      if (OH > 0 && OW > 0) return c;
    } else {
      if (c.dh * (c.KH - 1) + 1 <= c.H + 2 * c.ph && c.dw * (c.KW - 1) + 1 <= c.W + 2 * c.pw) return c;
    }
  }
}

}  // namespace

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

TEST(Conv2d, RandomGeometriesMatchDirectLoops) {
  std::mt19937 rng(7);
  for (int i = 0; i < 60; ++i) check_conv(random_cfg(rng, false), DType::Float64, false, 100 + i);
  for (int i = 0; i < 10; ++i) check_conv(random_cfg(rng, false), DType::Float32, false, 200 + i);
}

TEST(Conv2d, SamePaddingOddAndEvenKernels) {
  for (int64_t k : {1, 2, 3, 4, 5})
    for (int64_t d : {1, 2}) {
      Cfg c;
      c.N = 2, c.C = 2, c.OC = 3, c.H = 6, c.W = 7, c.KH = k, c.KW = 3, c.dh = d, c.same = true;
      check_conv(c, DType::Float64, false, 300 + k * 10 + d);
    }
}

TEST(Conv2d, PointwiseDepthwiseAndBatchedChunks) {
  Cfg pw;  // 1x1 stride 1: the plain-GEMM path
  pw.N = 3, pw.C = 5, pw.OC = 4, pw.H = 6, pw.W = 7, pw.KH = 1, pw.KW = 1;
  check_conv(pw, DType::Float64, false, 1);
  pw.groups = 1, pw.sh = 2;  // 1x1 strided goes through im2col
  check_conv(pw, DType::Float64, false, 2);
  Cfg dw;  // depthwise: direct loops, with stride/padding/dilation
  dw.N = 2, dw.C = 4, dw.OC = 4, dw.groups = 4, dw.H = 9, dw.W = 8, dw.ph = 1, dw.pw = 2, dw.sh = 2, dw.dw = 2;
  check_conv(dw, DType::Float64, false, 3);
  dw.sh = 1, dw.sw = 1, dw.dw = 1;
  check_conv(dw, DType::Float32, false, 4);
  check_conv(dw, DType::Float64, true, 5);
  Cfg mult = dw;  // channel multiplier 2: grouped GEMMs
  mult.OC = 8;
  check_conv(mult, DType::Float64, false, 6);
  Cfg many;  // small images, large batch: several images per GEMM, several threads
  many.N = 37, many.C = 3, many.OC = 5, many.H = 5, many.W = 4, many.ph = 1;
  check_conv(many, DType::Float64, false, 7);
  check_conv(many, DType::Float32, false, 8);
  check_conv(many, DType::Float64, true, 9);
  many.groups = 1, many.KH = 1, many.KW = 1, many.ph = 0;
  check_conv(many, DType::Float64, false, 10);  // pointwise, many images
}

TEST(Conv2d, SmallImagesChannelsLastPath) {
  // At least 8 channels and output rows shorter than 16: the channels-last im2row path.
  Cfg c;
  c.N = 5, c.C = 9, c.OC = 6, c.H = 7, c.W = 6;
  check_conv(c, DType::Float64, false, 31);
  check_conv(c, DType::Float32, false, 32);
  c.ph = 2, c.pw = 1, c.sh = 2, c.dw = 2, c.KW = 2, c.bias = false;
  check_conv(c, DType::Float64, false, 33);
  c.N = 40;  // several images per GEMM and several threads
  check_conv(c, DType::Float64, false, 34);
  Cfg t;  // transposed: the conv it inverts has OC = 8 input channels
  t.N = 3, t.C = 5, t.OC = 8, t.H = 4, t.W = 3, t.sh = 2, t.sw = 2, t.ph = 1, t.opw = 1;
  check_conv(t, DType::Float64, true, 35);
  Cfg mnist;  // the MNIST CNN's second and third layers, scaled down
  mnist.N = 3, mnist.C = 32, mnist.OC = 8, mnist.H = 13, mnist.W = 13;
  check_conv(mnist, DType::Float32, false, 36);
  mnist.C = 16, mnist.H = 5, mnist.W = 5;
  check_conv(mnist, DType::Float32, false, 37);
  Tensor x = randn_t({2, 8, 4, 4}, 38, DType::Float64, true);
  Tensor w = randn_t({3, 8, 3, 3}, 39, DType::Float64, true);
  Conv2dParams p;
  p.padding = {1, 0};
  EXPECT_TRUE(grad_ok([p](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], Tensor(), p); }, {x, w}));
}

TEST(Conv2d, LargeImagesRunInRowTiles) {
  // 32 input channels at 32x31: one image's float64 column matrix is cut into 3 row tiles.
  Cfg c;
  c.N = 1, c.C = 32, c.OC = 3, c.H = 32, c.W = 31, c.ph = 1, c.pw = 1;
  check_conv(c, DType::Float64, false, 21);
  c.sh = 2, c.dw = 2;
  check_conv(c, DType::Float32, false, 22);
  Cfg t;  // conv_transpose2d's forward runs the tiled backward-data path of the conv it inverts
  t.N = 1, t.C = 3, t.OC = 32, t.H = 16, t.W = 15, t.sh = 2, t.sw = 2, t.ph = 1, t.oph = 1;
  check_conv(t, DType::Float64, true, 23);
}

TEST(Conv2d, NonContiguousInputAndEmptyBatch) {
  Tensor base = randn_t({1, 3, 6, 5}, 11, DType::Float64);
  Tensor x = base.transpose(2, 3);  // [1, 3, 5, 6], not contiguous
  Tensor w = randn_t({2, 3, 3, 3}, 12, DType::Float64);
  Tensor y = conv2d(x, w);
  EXPECT_TRUE(all_close(y, vec(conv2d(x.contiguous(), w)), 1e-12, 1e-12));
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

TEST(Conv2d, Gradcheck) {
  std::vector<Cfg> cfgs;
  Cfg a;
  a.N = 2, a.C = 2, a.OC = 2, a.H = 5, a.W = 4, a.ph = 1, a.pw = 0;
  cfgs.push_back(a);
  Cfg s = a;
  s.sh = 2, s.sw = 3, s.dh = 2, s.ph = 2;
  cfgs.push_back(s);
  Cfg g = a;
  g.C = 4, g.OC = 2, g.groups = 2, g.bias = false;
  cfgs.push_back(g);
  Cfg dw = a;
  dw.C = 3, dw.OC = 3, dw.groups = 3, dw.sw = 2;
  cfgs.push_back(dw);
  Cfg same = a;
  same.same = true, same.ph = 0, same.KH = 2, same.dw = 2;
  cfgs.push_back(same);
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(describe(c));
    Tensor x = randn_t({c.N, c.C, c.H, c.W}, 1, DType::Float64, true);
    Tensor w = randn_t({c.OC, c.C / c.groups, c.KH, c.KW}, 2, DType::Float64, true);
    Tensor b = c.bias ? randn_t({c.OC}, 3, DType::Float64, true) : Tensor();
    Conv2dParams p = conv_params(c);
    EXPECT_TRUE(grad_ok([p](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], p); }, {x, w, b}));
  }
}

TEST(Conv2d, Errors) {
  Tensor x = zeros({2, 3, 8, 8});
  Tensor w = zeros({32, 1, 3, 3});
  expect_error([&] { conv2d(x, w); },
               {"conv2d: input has 3 channels but weight expects 1 (weight shape [32, 1, 3, 3])"});
  expect_error([&] { conv2d(zeros({3, 8, 8}), w); }, {"conv2d", "4-D input", "[3, 8, 8]"});
  expect_error([&] { conv2d(x, zeros({4, 3, 3})); }, {"conv2d", "4-D weight"});
  expect_error([&] { conv2d(x, zeros({4, 3, 3, 3}, {.dtype = DType::Float64})); }, {"conv2d", "weight dtype float64"});
  expect_error([&] { conv2d(zeros({2, 3, 8, 8}, {.dtype = DType::Int64}), w); }, {"conv2d", "float32 or float64"});
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

TEST(ConvTranspose2d, RandomGeometriesMatchDirectLoops) {
  std::mt19937 rng(11);
  for (int i = 0; i < 50; ++i) check_conv(random_cfg(rng, true), DType::Float64, true, 500 + i);
  for (int i = 0; i < 8; ++i) check_conv(random_cfg(rng, true), DType::Float32, true, 600 + i);
}

TEST(ConvTranspose2d, Gradcheck) {
  Cfg a;
  a.N = 2, a.C = 2, a.OC = 3, a.H = 3, a.W = 4, a.sh = 2, a.sw = 1, a.ph = 1, a.oph = 1, a.dw = 2;
  Cfg g = a;
  g.C = 4, g.OC = 2, g.groups = 2, g.bias = false, g.oph = 0, g.sw = 3, g.opw = 2;
  for (const Cfg& c : {a, g}) {
    SCOPED_TRACE(describe(c));
    Tensor x = randn_t({c.N, c.C, c.H, c.W}, 4, DType::Float64, true);
    Tensor w = randn_t({c.C, c.OC / c.groups, c.KH, c.KW}, 5, DType::Float64, true);
    Tensor b = c.bias ? randn_t({c.OC}, 6, DType::Float64, true) : Tensor();
    ConvTranspose2dParams p = tconv_params(c);
    EXPECT_TRUE(
        grad_ok([p](const std::vector<Tensor>& in) { return conv_transpose2d(in[0], in[1], in[2], p); }, {x, w, b}));
  }
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
