// Rows: max and average pooling through every window geometry the pooling kernels treat
// differently: the MNIST 2x2, padded 3x3 windows of stride 2 with and without the padding in the
// divisor, ceil_mode's overhanging last window, overlapping windows (stride 1), a stride above the
// kernel (inputs no window reads), no planes; ties inside windows (the first maximum wins: the
// gradient shows which), NaN and infinities; adaptive average pooling to sizes that do and do not
// divide the input, in float32 and float64 (core/nn_kernels.h). These rows took over tests/emu's
// pooling checks.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

struct Geometry {
  const char* name;
  int64_t P, H, W;
  Pool2dParams p;
};

// Halves of small integers: ties inside a window are common.
Tensor rounded(Generator& g, Shape s, DType dt) {
  return mul(randint(-4, 5, std::move(s), {.dtype = DType::Float64}, &g), 0.5).to(dt);
}

// A pooling geometry as tests/core drew them at random.
struct PoolCfg {
  int64_t P = 1, H = 5, W = 5, kh = 2, kw = 2, sh = 2, sw = 2, ph = 0, pw = 0;
  bool ceil = false, include_pad = true;
};

Pool2dParams params_of(const PoolCfg& c) {
  return {.kernel = {c.kh, c.kw},
          .stride = {c.sh, c.sw},
          .padding = {c.ph, c.pw},
          .ceil_mode = c.ceil,
          .count_include_pad = c.include_pad};
}

// PyTorch's output size: with ceil_mode the last window must start inside the input or its left
// padding.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - k) / static_cast<double>(s);
  int64_t out = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

PoolCfg random_pool(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  for (;;) {
    PoolCfg c;
    c.P = pick(1, 4), c.H = pick(1, 9), c.W = pick(1, 9);
    c.kh = pick(1, 4), c.kw = pick(1, 4), c.sh = pick(1, 3), c.sw = pick(1, 3);
    c.ph = pick(0, static_cast<int>(c.kh / 2)), c.pw = pick(0, static_cast<int>(c.kw / 2));
    c.ceil = pick(0, 1) == 1, c.include_pad = pick(0, 1) == 1;
    if (pool_out(c.H, c.kh, c.sh, c.ph, c.ceil) > 0 && pool_out(c.W, c.kw, c.sw, c.pw, c.ceil) > 0) return c;
  }
}

// The composed pooling: every window tap as a strided slice of the padded input, stacked as a new
// last dim [..., OH, OW, kh * kw] in row-major window order. `xp` is padded by (ph, pw) at the top
// and left and far enough at the bottom and right for the last window (ceil_mode's overhang).
struct Taps {
  const PoolCfg& c;
  int64_t OH, OW, bottom, right;
  explicit Taps(const PoolCfg& cfg)
      : c(cfg),
        OH(pool_out(cfg.H, cfg.kh, cfg.sh, cfg.ph, cfg.ceil)),
        OW(pool_out(cfg.W, cfg.kw, cfg.sw, cfg.pw, cfg.ceil)),
        bottom(std::max<int64_t>(0, (OH - 1) * cfg.sh + cfg.kh - cfg.H - cfg.ph)),
        right(std::max<int64_t>(0, (OW - 1) * cfg.sw + cfg.kw - cfg.W - cfg.pw)) {}
  Tensor padded(const Tensor& x, double fill) const {
    return pad(x, {c.pw, right, c.ph, bottom}, PadMode::Constant, fill);
  }
  Tensor of(const Tensor& xp) const {
    const int64_t hd = xp.dim() - 2, wd = xp.dim() - 1;
    std::vector<Tensor> taps;
    for (int64_t i = 0; i < c.kh; ++i)
      for (int64_t j = 0; j < c.kw; ++j)
        taps.push_back(xp.slice(hd, i, i + (OH - 1) * c.sh + 1, c.sh).slice(wd, j, j + (OW - 1) * c.sw + 1, c.sw));
    return stack(taps, xp.dim());
  }
  Tensor max(const Tensor& x) const { return amax(of(padded(x, -INFINITY)), {x.dim()}); }
  // The flat (per-plane) index of each window's first maximum.
  Tensor argmax_index(const Tensor& x) const {
    const Tensor flat = arange(0, static_cast<double>(c.H * c.W), 1, {.dtype = DType::Float64, .device = x.device()});
    Shape plane(static_cast<size_t>(x.dim()), 1);
    plane[plane.size() - 2] = c.H, plane[plane.size() - 1] = c.W;
    const Tensor where_from = of(padded(flat.reshape(plane), -1)).expand([&] {
      Shape s = x.shape();
      s[s.size() - 2] = OH, s[s.size() - 1] = OW;
      s.push_back(c.kh * c.kw);
      return s;
    }());
    const Tensor first = argmax(of(padded(x, -INFINITY)), x.dim());
    return gather(where_from, x.dim(), first.unsqueeze(x.dim())).squeeze(x.dim());
  }
  // The window sums over the count of taps inside the padded input (count_include_pad) or inside
  // the input; ceil_mode's overhang past the padding counts in neither.
  Tensor avg(const Tensor& x) const {
    Shape plane(static_cast<size_t>(x.dim()), 1);
    plane[plane.size() - 2] = c.H, plane[plane.size() - 1] = c.W;
    const Tensor ones_plane = ones(plane, x.options());
    const Tensor mask = c.include_pad
                            ? pad(pad(ones_plane, {c.pw, c.pw, c.ph, c.ph}, PadMode::Constant, 1.0),
                                  {0, std::max<int64_t>(0, right - c.pw), 0, std::max<int64_t>(0, bottom - c.ph)})
                            : padded(ones_plane, 0.0);
    return div(sum(of(padded(x, 0.0)), {x.dim()}), sum(of(mask), {x.dim()}));
  }
};

// Adaptive average pooling: output (oh, ow) averages rows [floor(oh H / OH), ceil((oh + 1) H / OH))
// and the same columns.
Tensor adaptive_composed(const Tensor& x, int64_t OH, int64_t OW) {
  const int64_t hd = x.dim() - 2, wd = x.dim() - 1, H = x.size(hd), W = x.size(wd);
  std::vector<Tensor> rows;
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
    std::vector<Tensor> cols;
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
      cols.push_back(mean(x.narrow(hd, h0, h1 - h0).narrow(wd, w0, w1 - w0), {hd, wd}));
    }
    rows.push_back(stack(cols, hd));
  }
  return stack(rows, hd);
}

std::string pool_name(const PoolCfg& c) {
  return std::to_string(c.P) + "x" + std::to_string(c.H) + "x" + std::to_string(c.W) + "_k" + std::to_string(c.kh) +
         "x" + std::to_string(c.kw) + "_s" + std::to_string(c.sh) + "x" + std::to_string(c.sw) + "_p" +
         std::to_string(c.ph) + "x" + std::to_string(c.pw) + (c.ceil ? "_ceil" : "") +
         (c.include_pad ? "" : "_exclude_pad");
}

// Max and average pooling against their compositions on drawn and chosen configurations.
void add_pooling_vs_composed_rows(std::vector<OpRow>& t) {
  struct Drawn {
    std::string name;
    PoolCfg c;
    DType dt;
  };
  auto draw = [](uint32_t seed) {
    std::vector<Drawn> v;
    std::mt19937 rng(seed);
    for (int i = 0; i < 70; ++i) {
      const PoolCfg c = random_pool(rng);
      v.push_back({"random_" + std::to_string(i) + "_" + pool_name(c), c, i < 60 ? DType::Float64 : DType::Float32});
    }
    return v;
  };
  std::vector<Drawn> max_cfgs = draw(3);
  PoolCfg mnist;  // the 2x2/2 fast path, odd size (the last row and column dropped)
  mnist.P = 6, mnist.H = 13, mnist.W = 11;
  max_cfgs.push_back({"mnist_6x13x11", mnist, DType::Float32});
  max_cfgs.push_back({"mnist_6x13x11", mnist, DType::Float64});
  auto input = [](const PoolCfg& c, DType dt) {
    return [c, dt](Generator& g) { return Inputs{randn({c.P, 1, c.H, c.W}, {.dtype = dt}, &g)}; };
  };
  const auto tol_of = [](DType dt) { return dt == DType::Float64 ? 1e-9 : 2e-4; };
  for (const Drawn& d : max_cfgs) {
    const PoolCfg c = d.c;
    const std::string tag = d.name + "_" + dtype_name(d.dt);
    t.push_back({"max_pool2d_vs_composed_" + tag, input(c, d.dt),
                 [c, tol = tol_of(d.dt)](const Inputs& x) {
                   return checked_composed(
                       max_pool2d(x[0], params_of(c)), x, [c](const Inputs& h) { return Taps(c).max(h[0]); }, tol);
                 },
                 tol_of(d.dt)});
    t.push_back({"max_pool2d_indices_vs_composed_" + tag, input(c, d.dt),
                 [c](const Inputs& x) {
                   return checked_composed(
                       max_pool2d_with_indices(x[0], params_of(c)).second.to(DType::Float64), x,
                       [c](const Inputs& h) { return Taps(c).argmax_index(h[0]); }, 0.0);
                 },
                 0.0, false, false});
  }
  for (const Drawn& d : draw(5)) {
    const PoolCfg c = d.c;
    t.push_back({"avg_pool2d_vs_composed_" + d.name + "_" + dtype_name(d.dt), input(c, d.dt),
                 [c, tol = tol_of(d.dt)](const Inputs& x) {
                   return checked_composed(
                       avg_pool2d(x[0], params_of(c)), x, [c](const Inputs& h) { return Taps(c).avg(h[0]); }, tol);
                 },
                 tol_of(d.dt)});
  }
  {
    std::mt19937 rng(9);
    auto pick = [&](int lo, int hi) { return static_cast<int64_t>(std::uniform_int_distribution<int>(lo, hi)(rng)); };
    for (int it = 0; it < 30; ++it) {
      const int64_t P = pick(1, 3), H = pick(1, 9), W = pick(1, 9), OH = pick(1, 6), OW = pick(1, 6);
      t.push_back({"adaptive_avg_pool2d_vs_composed_" + std::to_string(it) + "_" + std::to_string(P) + "x" +
                       std::to_string(H) + "x" + std::to_string(W) + "_to_" + std::to_string(OH) + "x" +
                       std::to_string(OW),
                   [P, H, W](Generator& g) {
                     return Inputs{randn({P, H, W}, {.dtype = DType::Float64}, &g)};
                   },
                   [OH, OW](const Inputs& x) {
                     return checked_composed(
                         adaptive_avg_pool2d(x[0], {OH, OW}), x,
                         [OH, OW](const Inputs& h) { return adaptive_composed(h[0], OH, OW); }, 1e-9);
                   },
                   1e-9});
    }
  }
}

void add_pooling_gradcheck_rows(std::vector<OpRow>& t) {
  // The ops themselves for finite differences: a 3x2 window of stride 2 with padding, with and
  // without ceil_mode and the padding in the divisor; adaptive to 3x4; the 2x2 fast path.
  auto small = [](Generator& g) { return Inputs{rn(g, {2, 2, 5, 6})}; };
  for (bool ceil : {false, true})
    for (bool inc : {false, true}) {
      const Pool2dParams p{
          .kernel = {3, 2}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = ceil, .count_include_pad = inc};
      const std::string tag = std::string(ceil ? "_ceil" : "") + (inc ? "" : "_exclude_pad");
      t.push_back({"avg_pool2d_small_3x2_s2_p1" + tag, small, [p](const Inputs& x) { return avg_pool2d(x[0], p); }});
      if (inc)  // max pooling ignores count_include_pad
        t.push_back({"max_pool2d_small_3x2_s2_p1" + tag, small, [p](const Inputs& x) { return max_pool2d(x[0], p); }});
    }
  t.push_back({"adaptive_avg_pool2d_small_to_3x4", small, [](const Inputs& x) {
                 return adaptive_avg_pool2d(x[0], {3, 4});
               }});
  t.push_back({"max_pool2d_small_2x2", small, [](const Inputs& x) { return max_pool2d(x[0], 2); }});
}

// The pooling ops against their compositions: random geometries (padding, strides above and
// below the kernel, ceil_mode, count_include_pad) as tests/core drew them when they compared with
// direct loops, the MNIST 2x2 fast path at an odd size, adaptive pooling to random sizes; values,
// gradients and max pooling's indices (exactly); and the ops themselves for finite differences.
void add_pooling_composed_rows(std::vector<OpRow>& t) {
  add_pooling_vs_composed_rows(t);
  add_pooling_gradcheck_rows(t);
}

}  // namespace

void add_pooling_rows(std::vector<OpRow>& t) {
  const std::vector<Geometry> geometries = {
      {"mnist_2x2", 3, 8, 8, {.kernel = {2, 2}}},
      {"padded_3x3_s2", 2, 7, 9, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}},
      {"padded_3x3_s2_exclude_pad",
       2,
       7,
       9,
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false}},
      {"ceil_mode", 2, 7, 8, {.kernel = {3, 2}, .stride = {2, 3}, .padding = {1, 1}, .ceil_mode = true}},
      {"ceil_mode_exclude_pad",
       2,
       7,
       8,
       {.kernel = {3, 2}, .stride = {2, 3}, .padding = {1, 1}, .ceil_mode = true, .count_include_pad = false}},
      {"overlapping_s1", 1, 6, 5, {.kernel = {2, 3}, .stride = {1, 1}, .padding = {0, 1}}},
      {"stride_above_kernel", 2, 9, 9, {.kernel = {2, 2}, .stride = {3, 3}}},
      {"no_planes", 0, 4, 4, {.kernel = {2, 2}}},
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Geometry& g : geometries) {
      const std::string tag = std::string(dtype_name(dt)) + "_" + g.name;
      const Shape s = {1, g.P, g.H, g.W};
      if (g.p.count_include_pad) {  // max pooling ignores count_include_pad: once per window geometry
        OpRow mx{"max_pool2d_ties_" + tag, [s, dt](Generator& gen) { return Inputs{rounded(gen, s, dt)}; },
                 [p = g.p](const Inputs& x) { return max_pool2d(x[0], p); }};
        mx.gradcheck = false;  // ties
        t.push_back(std::move(mx));
        t.push_back({"max_pool2d_indices_" + tag, [s, dt](Generator& gen) { return Inputs{rounded(gen, s, dt)}; },
                     [p = g.p](const Inputs& x) { return max_pool2d_with_indices(x[0], p).second; }, 0.0, false,
                     false});
      }
      OpRow av{"avg_pool2d_" + tag, [s, dt](Generator& gen) { return Inputs{randn(s, {.dtype = dt}, &gen)}; },
               [p = g.p](const Inputs& x) { return avg_pool2d(x[0], p); }};
      av.gradcheck = dt == DType::Float32;
      t.push_back(std::move(av));
    }
  }
  // NaN wins a window (the last NaN of a window is the one recorded, as on the CPU); infinities
  // compare as numbers.
  t.push_back({"max_pool2d_nan_and_infinities",
               [](Generator&) {
                 return Inputs{from_vector<double>(
                     {1, NAN, 3, 4, NAN, 2, -INFINITY, -INFINITY, 5, 6, INFINITY, 0, 7, 8, 1, NAN}, {1, 1, 4, 4})};
               },
               [](const Inputs& x) {
                 auto [v, i] = max_pool2d_with_indices(x[0], {.kernel = {2, 2}});
                 return cat({v.to(DType::Float64).reshape({-1}), i.to(DType::Float64).reshape({-1})}, 0);
               },
               0.0, false, false, false});
  struct Adaptive {
    int64_t P, H, W, OH, OW;
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Adaptive& c :
         {Adaptive{2, 7, 9, 3, 4}, Adaptive{1, 8, 8, 4, 4}, Adaptive{3, 5, 6, 1, 1}, Adaptive{1, 3, 4, 5, 7}}) {
      OpRow r{std::string("adaptive_avg_pool2d_") + dtype_name(dt) + "_" + std::to_string(c.H) + "x" +
                  std::to_string(c.W) + "_to_" + std::to_string(c.OH) + "x" + std::to_string(c.OW),
              [c, dt](Generator& g) {
                return Inputs{randn({1, c.P, c.H, c.W}, {.dtype = dt}, &g)};
              },
              [c](const Inputs& x) {
                return adaptive_avg_pool2d(x[0], {c.OH, c.OW});
              }};
      r.gradcheck = dt == DType::Float32;
      t.push_back(std::move(r));
    }
  }
  add_pooling_composed_rows(t);
}

}  // namespace ember::ops_test
