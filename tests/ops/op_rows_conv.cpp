// Rows: conv2d and conv_transpose2d through every geometry the convolution kernels treat
// differently (stride, padding, dilation, groups and depthwise, same padding with odd and even
// kernels, output_padding, 1x1 as a plain GEMM, small images on the channels-last path, large
// images in row tiles, many images per GEMM), each checked inside the row against the same
// convolution composed from pad, strided slices and matmul, output and all three gradients, on
// every backend and CPU level (an oracle that shares no code with the convolution kernels:
// tests/ops/composed.h); and the ops themselves on small geometries for finite differences. The
// geometries include the random ones tests/core's conv tests drew (same generator, same seeds)
// when they compared with direct loops; these rows took over those checks (core/nn_kernels.h).
#include <random>
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

struct Cfg {
  int64_t N = 1, C = 1, H = 5, W = 5, OC = 1, KH = 3, KW = 3;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
  int64_t oph = 0, opw = 0;  // conv_transpose2d only
  bool bias = true;
  bool same = false;  // conv2d only
};

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

// y[n, oc, oh, ow] = b[oc] + sum over (kh, kw) of w[oc, :, kh, kw] · x_padded[n, group's channels,
// oh*s + kh*d, ow*s + kw*d]: one strided slice of the padded input and one matmul per kernel tap
// and group.
Tensor conv2d_composed(const Tensor& x, const Tensor& w, const Tensor& b, const Cfg& c) {
  int64_t top = c.ph, bottom = c.ph, left = c.pw, right = c.pw;
  if (c.same) {  // PyTorch's split: the odd pixel of an even kernel's padding goes bottom/right
    top = c.dh * (c.KH - 1) / 2, bottom = c.dh * (c.KH - 1) - top;
    left = c.dw * (c.KW - 1) / 2, right = c.dw * (c.KW - 1) - left;
  }
  const Tensor xp = pad(x, {left, right, top, bottom});
  const int64_t OH = (xp.size(2) - c.dh * (c.KH - 1) - 1) / c.sh + 1;
  const int64_t OW = (xp.size(3) - c.dw * (c.KW - 1) - 1) / c.sw + 1;
  const int64_t Cg = c.C / c.groups, OCg = c.OC / c.groups;
  Tensor y;
  for (int64_t kh = 0; kh < c.KH; ++kh)
    for (int64_t kw = 0; kw < c.KW; ++kw) {
      const Tensor tap = xp.slice(2, kh * c.dh, kh * c.dh + (OH - 1) * c.sh + 1, c.sh)
                             .slice(3, kw * c.dw, kw * c.dw + (OW - 1) * c.sw + 1, c.sw);
      std::vector<Tensor> groups;
      for (int64_t g = 0; g < c.groups; ++g) {
        const Tensor wg = w.narrow(0, g * OCg, OCg).select(3, kw).select(2, kh);  // [OCg, Cg]
        groups.push_back(matmul(wg, tap.narrow(1, g * Cg, Cg).reshape({c.N, Cg, OH * OW})));
      }
      const Tensor term = cat(groups, 1).reshape({c.N, c.OC, OH, OW});
      y = y.defined() ? add(y, term) : term;
    }
  return b.defined() ? add(y, b.reshape({1, c.OC, 1, 1})) : y;
}

// `t` with s - 1 zeros after each element along `dim` (none after the last).
Tensor spread(const Tensor& t, int64_t dim, int64_t s) {
  if (s == 1) return t;
  Shape zs = t.shape();
  zs.insert(zs.begin() + dim + 1, s - 1);
  Shape out = t.shape();
  out[static_cast<size_t>(dim)] *= s;
  return cat({t.unsqueeze(dim + 1), zeros(zs, t.options())}, dim + 1)
      .reshape(out)
      .narrow(dim, 0, (t.size(dim) - 1) * s + 1);
}

// y[n, oc, ih*s - p + kh*d, iw*s - p + kw*d] += x[n, ic, ih, iw] * w[ic, oc', kh, kw]: per kernel tap
// and group one matmul, spread by the stride and padded into place on an uncropped canvas, which
// is then cropped by the padding (output_padding's extra rows and columns get only the bias).
Tensor conv_transpose2d_composed(const Tensor& x, const Tensor& w, const Tensor& b, const Cfg& c) {
  const int64_t Cg = c.C / c.groups;
  const int64_t HS = (c.H - 1) * c.sh + 1, WS = (c.W - 1) * c.sw + 1;  // a spread input's size
  const int64_t CH = HS + c.dh * (c.KH - 1) + c.oph, CW = WS + c.dw * (c.KW - 1) + c.opw;
  Tensor canvas;
  for (int64_t kh = 0; kh < c.KH; ++kh)
    for (int64_t kw = 0; kw < c.KW; ++kw) {
      std::vector<Tensor> groups;
      for (int64_t g = 0; g < c.groups; ++g) {
        const Tensor wg = w.narrow(0, g * Cg, Cg).select(3, kw).select(2, kh).t();  // [OCg, Cg]
        groups.push_back(matmul(wg, x.narrow(1, g * Cg, Cg).reshape({c.N, Cg, c.H * c.W})));
      }
      const Tensor term = spread(spread(cat(groups, 1).reshape({c.N, c.OC, c.H, c.W}), 2, c.sh), 3, c.sw);
      const Tensor placed = pad(term, {kw * c.dw, CW - WS - kw * c.dw, kh * c.dh, CH - HS - kh * c.dh});
      canvas = canvas.defined() ? add(canvas, placed) : placed;
    }
  const Tensor y = pad(canvas, {-c.pw, -c.pw, -c.ph, -c.ph});
  return b.defined() ? add(y, b.reshape({1, c.OC, 1, 1})) : y;
}

// A random valid geometry, as tests/core drew them.
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

struct Geometry {
  std::string name;
  Cfg c;
  DType dt;
  bool transpose;
};

// Appends to a list of geometries: conv() a convolution's, tconv() a transposed convolution's.
struct GeometryList {
  std::vector<Geometry> v;
  void conv(const std::string& name, const Cfg& c, DType dt) { v.push_back({name, c, dt, false}); }
  void tconv(const std::string& name, const Cfg& c, DType dt) { v.push_back({name, c, dt, true}); }
};

// The geometries chosen for a kernel path each (pointwise, depthwise, many images, channels last,
// Winograd, row tiles), beside the random ones.
void add_path_geometries(GeometryList& g) {
  Cfg pw;  // 1x1 stride 1: the plain-GEMM path; strided 1x1 goes through im2col
  pw.N = 3, pw.C = 5, pw.OC = 4, pw.H = 6, pw.W = 7, pw.KH = 1, pw.KW = 1;
  g.conv("pointwise", pw, DType::Float64);
  pw.sh = 2;
  g.conv("pointwise_strided", pw, DType::Float64);
  Cfg dw;  // depthwise: direct loops, with stride, padding and dilation
  dw.N = 2, dw.C = 4, dw.OC = 4, dw.groups = 4, dw.H = 9, dw.W = 8, dw.ph = 1, dw.pw = 2, dw.sh = 2, dw.dw = 2;
  g.conv("depthwise_strided_dilated", dw, DType::Float64);
  dw.sh = 1, dw.sw = 1, dw.dw = 1;
  g.conv("depthwise", dw, DType::Float32);
  g.tconv("depthwise", dw, DType::Float64);
  Cfg mult = dw;  // channel multiplier 2: grouped GEMMs
  mult.OC = 8;
  g.conv("depthwise_multiplier2", mult, DType::Float64);
  Cfg many;  // small images, large batch: several images per GEMM, several threads
  many.N = 37, many.C = 3, many.OC = 5, many.H = 5, many.W = 4, many.ph = 1;
  g.conv("many_images", many, DType::Float64);
  g.conv("many_images", many, DType::Float32);
  g.tconv("many_images", many, DType::Float64);
  many.KH = 1, many.KW = 1, many.ph = 0;
  g.conv("many_images_pointwise", many, DType::Float64);
  Cfg cl;  // at least 8 channels and output rows shorter than 16: the channels-last im2row path
  cl.N = 5, cl.C = 9, cl.OC = 6, cl.H = 7, cl.W = 6;
  g.conv("channels_last", cl, DType::Float64);
  g.conv("channels_last", cl, DType::Float32);
  cl.ph = 2, cl.pw = 1, cl.sh = 2, cl.dw = 2, cl.KW = 2, cl.bias = false;
  g.conv("channels_last_padded_strided", cl, DType::Float64);
  cl.N = 40;  // several images per GEMM and several threads
  g.conv("channels_last_many_images", cl, DType::Float64);
  Cfg cl_odd;  // channel counts past a multiple of four (the transpose takes four at a time)
  cl_odd.N = 2, cl_odd.C = 21, cl_odd.OC = 17, cl_odd.H = 6, cl_odd.W = 9;
  g.conv("channels_last_odd_channels", cl_odd, DType::Float64);
  g.tconv("channels_last_odd_channels", cl_odd, DType::Float64);
  Cfg clt;  // transposed: the conv it inverts has 8 input channels
  clt.N = 3, clt.C = 5, clt.OC = 8, clt.H = 4, clt.W = 3, clt.sh = 2, clt.sw = 2, clt.ph = 1, clt.opw = 1;
  g.tconv("channels_last", clt, DType::Float64);
  Cfg mnist;  // the MNIST CNN's second and third layers, scaled down
  mnist.N = 3, mnist.C = 32, mnist.OC = 8, mnist.H = 13, mnist.W = 13;
  g.conv("mnist_layer2", mnist, DType::Float32);
  mnist.C = 16, mnist.H = 5, mnist.W = 5;
  g.conv("mnist_layer3", mnist, DType::Float32);
  Cfg wino;  // 3x3 stride 1, 8+ channels each way, outputs 6x6 or more: Winograd F(2x2, 3x3)
  wino.N = 3, wino.C = 9, wino.OC = 10, wino.H = 8, wino.W = 8;
  g.conv("winograd", wino, DType::Float64);
  g.conv("winograd", wino, DType::Float32);
  wino.N = 2, wino.C = 8, wino.OC = 11, wino.H = 9, wino.W = 10, wino.ph = 1, wino.pw = 2, wino.bias = false;
  g.conv("winograd_odd_even_padded", wino, DType::Float64);  // 9x12 outputs: clipped tiles
  wino.ph = 2, wino.pw = 0, wino.H = 7, wino.W = 13;
  g.conv("winograd_padding2", wino, DType::Float64);
  g.tconv("winograd", wino, DType::Float64);  // the conv it inverts: 11 -> 8 channels, padding 0
  Cfg wino_many;                              // several chunks of images and several threads
  wino_many.N = 40, wino_many.C = 12, wino_many.OC = 8, wino_many.H = 13, wino_many.W = 13;
  g.conv("winograd_many_images", wino_many, DType::Float64);
  g.conv("winograd_many_images", wino_many, DType::Float32);
  Cfg wino5;  // 5x5 stride 1, 8+ channels each way, outputs 6x6 or more: Winograd F(2x2, 5x5)
  wino5.N = 3, wino5.C = 9, wino5.OC = 10, wino5.H = 10, wino5.W = 10, wino5.KH = 5, wino5.KW = 5, wino5.ph = 2,
  wino5.pw = 2;
  g.conv("winograd5", wino5, DType::Float64);
  g.conv("winograd5", wino5, DType::Float32);
  wino5.N = 2, wino5.C = 8, wino5.OC = 11, wino5.H = 9, wino5.W = 11, wino5.ph = 1, wino5.pw = 4, wino5.bias = false;
  g.conv("winograd5_odd_padded", wino5, DType::Float64);  // 7x15 outputs: clipped tiles, padding 4 and 1
  // The DCGAN generator's first layer in small: 7x7, padding 2; the conv it inverts: 12 -> 16 channels.
  Cfg wino5_t;
  wino5_t.N = 5, wino5_t.C = 16, wino5_t.OC = 12, wino5_t.H = 7, wino5_t.W = 7, wino5_t.KH = 5, wino5_t.KW = 5;
  wino5_t.ph = 2, wino5_t.pw = 2;
  g.tconv("winograd5", wino5_t, DType::Float64);
  g.tconv("winograd5", wino5_t, DType::Float32);
  wino5_t.N = 40;  // several chunks of images and several threads
  g.conv("winograd5_many_images", wino5_t, DType::Float32);
  Cfg tiles;  // 32 input channels at 32x31: one image's float64 column matrix is cut into 3 row tiles
  tiles.N = 1, tiles.C = 32, tiles.OC = 3, tiles.H = 32, tiles.W = 31, tiles.ph = 1, tiles.pw = 1;
  g.conv("row_tiles", tiles, DType::Float64);
  tiles.sh = 2, tiles.dw = 2;
  g.conv("row_tiles_strided_dilated", tiles, DType::Float32);
  Cfg ttiles;  // conv_transpose2d's forward runs the tiled backward-data path of the conv it inverts
  ttiles.N = 1, ttiles.C = 3, ttiles.OC = 32, ttiles.H = 16, ttiles.W = 15, ttiles.sh = 2, ttiles.sw = 2;
  ttiles.ph = 1, ttiles.oph = 1;
  g.tconv("row_tiles", ttiles, DType::Float64);
}

std::vector<Geometry> geometries() {
  GeometryList g;
  {
    std::mt19937 rng(7);
    for (int i = 0; i < 60; ++i) g.conv("random_" + std::to_string(i), random_cfg(rng, false), DType::Float64);
    for (int i = 60; i < 70; ++i) g.conv("random_" + std::to_string(i), random_cfg(rng, false), DType::Float32);
  }
  for (int64_t k : {1, 2, 3, 4, 5})
    for (int64_t d : {1, 2}) {
      Cfg c;
      c.N = 2, c.C = 2, c.OC = 3, c.H = 6, c.W = 7, c.KH = k, c.KW = 3, c.dh = d, c.same = true;
      g.conv("same_k" + std::to_string(k) + "x3_d" + std::to_string(d), c, DType::Float64);
    }
  add_path_geometries(g);
  {
    std::mt19937 rng(11);
    for (int i = 0; i < 50; ++i) g.tconv("random_" + std::to_string(i), random_cfg(rng, true), DType::Float64);
    for (int i = 50; i < 58; ++i) g.tconv("random_" + std::to_string(i), random_cfg(rng, true), DType::Float32);
  }
  return g.v;
}

Inputs conv_inputs(Generator& g, const Cfg& c, DType dt, bool transpose) {
  const Shape w = transpose ? Shape{c.C, c.OC / c.groups, c.KH, c.KW} : Shape{c.OC, c.C / c.groups, c.KH, c.KW};
  Inputs in{randn({c.N, c.C, c.H, c.W}, {.dtype = dt}, &g), randn(w, {.dtype = dt}, &g)};
  if (c.bias) in.push_back(randn({c.OC}, {.dtype = dt}, &g));
  return in;
}

}  // namespace

void add_conv_rows(std::vector<OpRow>& t) {
  for (const Geometry& geo : geometries()) {
    const Cfg c = geo.c;
    const bool tr = geo.transpose;
    OpRow r{std::string(tr ? "conv_transpose2d" : "conv2d") + "_vs_composed_" + geo.name + "_" + dtype_name(geo.dt),
            [c, dt = geo.dt, tr](Generator& g) { return conv_inputs(g, c, dt, tr); },
            [c, tr,
             tol = Tolerance{geo.dt == DType::Float64 ? 1e-9 : 2e-4,
                             accumulation_atol(geo.dt, c.C / c.groups * c.KH * c.KW)}](const Inputs& x) {
              const Tensor b = c.bias ? x[2] : Tensor();
              const Tensor y =
                  tr ? conv_transpose2d(x[0], x[1], b, tconv_params(c)) : conv2d(x[0], x[1], b, conv_params(c));
              return checked_composed(
                  y, x,
                  [c, tr](const Inputs& h) {
                    const Tensor hb = c.bias ? h[2] : Tensor();
                    return tr ? conv_transpose2d_composed(h[0], h[1], hb, c) : conv2d_composed(h[0], h[1], hb, c);
                  },
                  tol);
            },
            geo.dt == DType::Float64 ? 1e-9 : 2e-4};
    r.atol = accumulation_atol(geo.dt, c.C / c.groups * c.KH * c.KW);  // sums of C KH KW products
    // The op's own finite differences are the rows below; the composition's gradients are the
    // oracle here.
    r.gradcheck = false;
    // The large images only contiguous: the small ones take the strided layout to the same code.
    r.strided = geo.name.rfind("row_tiles", 0) != 0;
    t.push_back(std::move(r));
  }

  // The op itself on small geometries, for finite differences in float64 (gradcheck group): plain,
  // strided and dilated, grouped without bias, depthwise, same padding with an even kernel; the
  // transposed op with output_padding and with groups.
  std::vector<std::pair<std::string, Cfg>> small;
  Cfg a;
  a.N = 2, a.C = 2, a.OC = 2, a.H = 5, a.W = 4, a.ph = 1, a.pw = 0;
  small.push_back({"padded", a});
  Cfg s = a;
  s.sh = 2, s.sw = 3, s.dh = 2, s.ph = 2;
  small.push_back({"strided_dilated", s});
  Cfg gr = a;
  gr.C = 4, gr.OC = 2, gr.groups = 2, gr.bias = false;
  small.push_back({"groups_no_bias", gr});
  Cfg dw = a;
  dw.C = 3, dw.OC = 3, dw.groups = 3, dw.sw = 2;
  small.push_back({"depthwise", dw});
  Cfg same = a;
  same.same = true, same.ph = 0, same.KH = 2, same.dw = 2;
  small.push_back({"same_even_kernel", same});
  Cfg wino;  // the Winograd path (8 channels each way, 6x6 outputs): forward and both gradients
  wino.N = 1, wino.C = 8, wino.OC = 8, wino.H = 6, wino.W = 8, wino.ph = 1, wino.pw = 0;
  small.push_back({"winograd", wino});
  Cfg wino5 = wino;  // F(2x2, 5x5): 7x6 outputs, clipped tiles below
  wino5.KH = 5, wino5.KW = 5, wino5.H = 7, wino5.W = 8, wino5.ph = 2, wino5.pw = 1;
  small.push_back({"winograd5", wino5});
  for (const auto& [name, c] : small) {
    t.push_back({"conv2d_small_" + name, [c = c](Generator& g) { return conv_inputs(g, c, DType::Float32, false); },
                 [c = c](const Inputs& x) { return conv2d(x[0], x[1], c.bias ? x[2] : Tensor(), conv_params(c)); }});
    t.back().atol = accumulation_atol(DType::Float32, c.C / c.groups * c.KH * c.KW);  // sums of products
  }
  Cfg ta;
  ta.N = 2, ta.C = 2, ta.OC = 3, ta.H = 3, ta.W = 4, ta.sh = 2, ta.sw = 1, ta.ph = 1, ta.oph = 1, ta.dw = 2;
  Cfg tg = ta;
  tg.C = 4, tg.OC = 2, tg.groups = 2, tg.bias = false, tg.oph = 0, tg.sw = 3, tg.opw = 2;
  for (const auto& [name, c] :
       {std::pair{std::string("output_padding_dilated"), ta}, std::pair{std::string("groups"), tg}})
    t.push_back(
        {"conv_transpose2d_small_" + name, [c = c](Generator& g) { return conv_inputs(g, c, DType::Float32, true); },
         [c = c](const Inputs& x) { return conv_transpose2d(x[0], x[1], c.bias ? x[2] : Tensor(), tconv_params(c)); }});
  // An empty batch: no outputs, and zero weight and bias gradients (the sums add one to both).
  t.push_back({"conv2d_empty_batch",
               [](Generator& g) {
                 return Inputs{rn(g, {0, 3, 5, 5}), rn(g, {2, 3, 3, 3}), rn(g, {2})};
               },
               [](const Inputs& x) { return add(sum(conv2d(x[0], x[1], x[2])), add(sum(x[1]), sum(x[2]))); }});
}

}  // namespace ember::ops_test
