// Rows: the three convolution kernels (core/nn_kernels.h: forward, backward-data, backward-filter
// with the bias gradient; on CUDA implicit GEMMs, float on 128 x 128 or 64 x 128 warp tiles, double
// in 64 x 64 x 16 tiles, 16-bit on the tensor cores: core/cuda/conv2d.cu) in every role the ops
// give them, over geometries that are not multiples of the tile: "same" 3x3; stride, dilation and
// groups with a rectangular kernel; depthwise with multiplier 2; two M tiles with K > 16 (the
// filter gradient split over K); input rows and columns no output reads; 1x1 of stride 2; an empty
// batch (the gradients must come back as zeros). Per geometry, in float32, float64 and (under
// autocast, held to the float64 run) bfloat16, float16 on three: a conv2d row (forward with bias,
// backward-data, filter and bias gradients together) and the conv_transpose2d of the same geometry
// (backward-data with its per-channel bias, forward without one, the filter gradient alone with
// input and output exchanged); and the filter and the bias gradient each alone. These rows took
// over tests/emu's conv2d checks. Inputs stay contiguous (the ops copy strided ones first:
// op_rows_nn.cpp's conv rows test that, and their derivatives by finite differences).
#include <algorithm>
#include <string>
#include <vector>

#include "op_table.h"

namespace ember::ops_test {
namespace {

struct Geometry {
  const char* name;
  int64_t N, C, H, W, OC, KH, KW, s, ph, pw, dil, groups;
  int64_t OH() const { return (H + 2 * ph - dil * (KH - 1) - 1) / s + 1; }
  int64_t OW() const { return (W + 2 * pw - dil * (KW - 1) - 1) / s + 1; }
  Shape weight() const { return {OC, C / groups, KH, KW}; }
  // The longest sum of products an element of the output or a gradient holds: an output's
  // C KH KW, an input gradient's OC KH KW, a filter gradient's N OH OW.
  int64_t longest_sum() const { return std::max({C / groups * KH * KW, OC / groups * KH * KW, N * OH() * OW()}); }
};

double tol_of(DType dt) {
  return dt == DType::Float32 ? 1e-4 : 1e-10;
}

// An empty batch has no output to compare: its sum (0) carries the gradients back, in y's dtype
// (autocast sums bfloat16 in float32).
Tensor reduced_if_empty(const Tensor& y) {
  return y.numel() == 0 ? sum(y).to(y.dtype()) : y;
}

Tensor conv_of(const Geometry& g, const Inputs& x) {
  return reduced_if_empty(
      conv2d(x[0], x[1], x[2],
             {.stride = {g.s, g.s}, .padding = {g.ph, g.pw}, .dilation = {g.dil, g.dil}, .groups = g.groups}));
}

// The adjoint: from the conv's output shape back to its input's (output_padding makes up the rows
// and columns the conv does not read).
Tensor transpose_of(const Geometry& g, const Inputs& x) {
  const int64_t oph = g.H - ((g.OH() - 1) * g.s - 2 * g.ph + g.dil * (g.KH - 1) + 1);
  const int64_t opw = g.W - ((g.OW() - 1) * g.s - 2 * g.pw + g.dil * (g.KW - 1) + 1);
  return reduced_if_empty(conv_transpose2d(x[0], x[1], x[2],
                                           {.stride = {g.s, g.s},
                                            .padding = {g.ph, g.pw},
                                            .output_padding = {oph, opw},
                                            .dilation = {g.dil, g.dil},
                                            .groups = g.groups}));
}

// Float32 inputs of these shapes, for the bfloat16 rows (autocast casts them).
std::function<Inputs(Generator&)> float32_inputs(std::vector<Shape> shapes) {
  return [shapes](Generator& g) {
    Inputs in;
    for (const Shape& s : shapes) in.push_back(rn(g, s));
    return in;
  };
}

OpRow row(std::string name, DType dt, std::vector<Shape> shapes, std::function<Tensor(const Inputs&)> f) {
  OpRow r{std::move(name),
          [dt, shapes](Generator& g) {
            Inputs in;
            for (const Shape& s : shapes) in.push_back(randn(s, {.dtype = dt}, &g));
            return in;
          },
          std::move(f), tol_of(dt)};
  r.gradcheck = false;
  r.strided = false;
  return r;
}

}  // namespace

void add_conv_tile_rows(std::vector<OpRow>& t) {
  const std::vector<Geometry> geometries = {
      {"same_3x3", 2, 3, 7, 7, 5, 3, 3, 1, 1, 1, 1, 1},
      {"stride_dilation_groups", 1, 4, 9, 8, 6, 3, 2, 2, 1, 0, 2, 2},
      {"depthwise_x2", 2, 4, 6, 6, 8, 3, 3, 1, 0, 0, 1, 4},
      {"two_m_tiles", 2, 8, 12, 12, 70, 3, 3, 1, 1, 1, 1, 1},
      // float's 128 x 128 tiles: two in M (130 channels), three in N (288 positions), a split filter
      // gradient (M 130, N 72, K 288), 16-byte output stores (12 x 12 positions a plane)
      {"two_wide_tiles", 2, 8, 12, 12, 130, 3, 3, 1, 1, 1, 1, 1},
      // bfloat16's filter gradient split in four (K = 4 x 16 x 16 = 1,024, 32-deep slices)
      {"split_k", 4, 8, 16, 16, 16, 3, 3, 1, 1, 1, 1, 1},
      {"unread_edge", 1, 2, 8, 7, 3, 3, 3, 2, 0, 0, 1, 1},
      {"1x1_stride_2", 3, 5, 5, 9, 4, 1, 1, 2, 0, 0, 1, 1},
      {"empty_batch", 0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1},
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string d = dtype_name(dt);
    for (const Geometry& g : geometries) {
      const double atol = accumulation_atol(dt, g.longest_sum());
      t.push_back(row("conv_tiles_" + d + "_" + g.name, dt, {{g.N, g.C, g.H, g.W}, g.weight(), {g.OC}},
                      [g](const Inputs& x) { return conv_of(g, x); }));
      t.back().atol = atol;
      t.push_back(row("conv_tiles_transpose_" + d + "_" + g.name, dt, {{g.N, g.OC, g.OH(), g.OW()}, g.weight(), {g.C}},
                      [g](const Inputs& x) { return transpose_of(g, x); }));
      t.back().atol = atol;
    }
    // conv_transpose2d with output_padding: its last output row and column are reached by no
    // input pixel, so only the bias lands there; groups 2.
    t.push_back(
        row("conv_tiles_transpose_output_padding_" + d, dt, {{2, 4, 5, 4}, {4, 3, 3, 3}, {6}}, [](const Inputs& x) {
          return conv_transpose2d(x[0], x[1], x[2],
                                  {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 1}, .groups = 2});
        }));
  }
  // bfloat16 under autocast (on CUDA the tensor-core kernel, core/cuda/conv_bf16_mma.h, on 128 x 128
  // x 32 tiles, the filter gradient's partial sums in float32), held to the float64 run; float16,
  // the same kernel with its own fragments and conversions, on the geometries that cover its tiles.
  for (const Geometry& g : geometries) {
    const std::string name = std::string("conv_tiles_") + g.name;
    const bool tiles =
        name == "conv_tiles_same_3x3" || name == "conv_tiles_two_wide_tiles" || name == "conv_tiles_split_k";
    for (DType low : {DType::BFloat16, DType::Float16}) {
      if (low == DType::Float16 && !tiles) continue;
      t.push_back(autocast_row(low, name, g.longest_sum(), float32_inputs({{g.N, g.C, g.H, g.W}, g.weight(), {g.OC}}),
                               [g](const Inputs& x) { return conv_of(g, x); }));
      t.back().strided = false;
      t.push_back(autocast_row(low, "transpose_" + name, g.longest_sum(),
                               float32_inputs({{g.N, g.OC, g.OH(), g.OW()}, g.weight(), {g.C}}),
                               [g](const Inputs& x) { return transpose_of(g, x); }));
      t.back().strided = false;
    }
  }
  // The filter gradient without the bias's, and the bias gradient without the filter's.
  for (size_t constant : {size_t{1}, size_t{2}}) {
    OpRow r = row(constant == 1 ? "conv_tiles_float32_bias_gradient_alone" : "conv_tiles_float32_filter_gradient_alone",
                  DType::Float32, {{2, 3, 6, 5}, {4, 3, 3, 3}, {4}}, [](const Inputs& x) {
                    return conv2d(x[0], x[1], x[2], {.padding = {1, 1}});
                  });
    r.constants = {constant};
    t.push_back(std::move(r));
  }
}

}  // namespace ember::ops_test
