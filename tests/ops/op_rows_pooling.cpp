// Rows: max and average pooling through every window geometry the pooling kernels treat
// differently: the MNIST 2x2, padded 3x3 windows of stride 2 with and without the padding in the
// divisor, ceil_mode's overhanging last window, overlapping windows (stride 1), a stride above the
// kernel (inputs no window reads), no planes; ties inside windows (the first maximum wins: the
// gradient shows which), NaN and infinities; adaptive average pooling to sizes that do and do not
// divide the input, in float32 and float64 (core/nn_kernels.h). These rows took over tests/emu's
// pooling checks.
#include <cmath>
#include <string>
#include <vector>

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
}

}  // namespace ember::ops_test
