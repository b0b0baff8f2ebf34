// The CUDA pooling kernels (core/cuda/pool.cu) run by the kernel emulator against the CPU
// kernels: max pooling (values, argmax indices, ties, NaN, and the gradient), average pooling
// with and without count_include_pad, padding, strides below and above the kernel size,
// ceil_mode's overhanging last window, and adaptive average pooling to sizes that do and do not
// divide the input, float and double, in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/nn_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;
using test_util::expect_error;

namespace {

class Pool : public emu_test::EmulatedKernel {};

// The op layer's output size, with PyTorch's ceil_mode rule (the last window must start inside
// the input or its left padding).
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode) {
  int64_t o = (in + 2 * p - k + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p) --o;
  return o;
}

Pool2dGeometry geometry(int64_t P, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                        int64_t pw, bool ceil_mode, bool include_pad) {
  Pool2dGeometry g;
  g.P = P, g.H = H, g.W = W, g.kh = kh, g.kw = kw, g.sh = sh, g.sw = sw, g.ph = ph, g.pw = pw;
  g.count_include_pad = include_pad;
  g.OH = out_size(H, kh, sh, ph, ceil_mode), g.OW = out_size(W, kw, sw, pw, ceil_mode);
  return g;
}

std::string name_of(const Pool2dGeometry& g) {
  std::ostringstream os;
  os << "P" << g.P << " " << g.H << "x" << g.W << " -> " << g.OH << "x" << g.OW << " k" << g.kh << "x" << g.kw << " s"
     << g.sh << "x" << g.sw << " p" << g.ph << "x" << g.pw << (g.count_include_pad ? " incl" : " excl");
  return os.str();
}

const std::vector<Pool2dGeometry>& geometries() {
  static const std::vector<Pool2dGeometry> v = {
      geometry(3, 8, 8, 2, 2, 2, 2, 0, 0, false, true),   // the MNIST 2x2
      geometry(2, 7, 9, 3, 3, 2, 2, 1, 1, false, true),   // padded 3x3 stride 2
      geometry(2, 7, 9, 3, 3, 2, 2, 1, 1, false, false),  // the same without the padding in the divisor
      geometry(2, 7, 8, 3, 2, 2, 3, 1, 1, true, true),    // ceil_mode: the last window overhangs
      geometry(2, 7, 8, 3, 2, 2, 3, 1, 1, true, false),
      geometry(1, 6, 5, 2, 3, 1, 1, 0, 1, false, true),  // overlapping windows (stride 1)
      geometry(2, 9, 9, 2, 2, 3, 3, 0, 0, false, true),  // stride above the kernel: inputs no window reads
      geometry(0, 4, 4, 2, 2, 2, 2, 0, 0, false, true),  // no planes
  };
  return v;
}

// Small integers: ties inside a window are common.
Tensor rounded(const Shape& s, DType dt) {
  std::vector<double> v = randn(s, {.dtype = DType::Float64}).to_vector<double>();
  for (double& x : v) x = std::round(2 * x);
  return from_vector(v, s).to(dt);
}

double tol(DType dt) {
  return dt == DType::Float32 ? 1e-5 : 1e-12;
}

}  // namespace

TEST_P(Pool, MaxForwardAndBackwardMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Pool2dGeometry& g : geometries()) {
      const std::string what = std::string(dtype_name(dt)) + " " + name_of(g);
      const Shape xs{g.P, g.H, g.W}, ys{g.P, g.OH, g.OW};
      // Rounded values make ties (the first maximum wins) common.
      Tensor x = rounded(xs, dt), dy = randn(ys, {.dtype = dt});
      Tensor y = empty(ys, {.dtype = dt}), idx = empty(ys, {.dtype = DType::Int64});
      max_pool2d_forward_stub(Device::cpu())(y, idx, x, g);
      Tensor yd = device_empty(ys, dt), idxd = device_empty(ys, DType::Int64);
      emu::kernel(max_pool2d_forward_stub)(yd, idxd, device_copy(x), g);
      expect_close(yd, y, 0, 0, what + " max values");
      EXPECT_EQ(idxd.to_vector<int64_t>(), idx.to_vector<int64_t>()) << what << " argmax indices";

      Tensor dx = empty(xs, {.dtype = dt}), dxd = device_empty(xs, dt);
      max_pool2d_backward_stub(Device::cpu())(dx, dy, idx, g);
      emu::kernel(max_pool2d_backward_stub)(dxd, device_copy(dy), device_copy(idx), g);
      expect_close(dxd, dx, tol(dt), tol(dt), what + " max gradient");
    }
  }
}

// NaN wins a window (and the last NaN of a window is the one recorded, as on the CPU);
// infinities compare as numbers.
TEST_P(Pool, MaxPropagatesNaNLikeTheCpu) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const Pool2dGeometry g = geometry(1, 4, 4, 2, 2, 2, 2, 0, 0, false, true);
  Tensor x = from_vector<float>({1, nan, 3, 4, nan, 2, -inf, -inf, 5, 6, inf, 0, 7, 8, 1, nan}, {1, 4, 4});
  Tensor y = empty({1, 2, 2}), idx = empty({1, 2, 2}, {.dtype = DType::Int64});
  max_pool2d_forward_stub(Device::cpu())(y, idx, x, g);
  Tensor yd = device_empty({1, 2, 2}, DType::Float32), idxd = device_empty({1, 2, 2}, DType::Int64);
  emu::kernel(max_pool2d_forward_stub)(yd, idxd, device_copy(x), g);
  expect_close(yd, y, 0, 0, "max with NaN");
  EXPECT_EQ(idxd.to_vector<int64_t>(), idx.to_vector<int64_t>());
}

TEST_P(Pool, AverageForwardAndBackwardMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Pool2dGeometry& g : geometries()) {
      const std::string what = std::string(dtype_name(dt)) + " " + name_of(g);
      const Shape xs{g.P, g.H, g.W}, ys{g.P, g.OH, g.OW};
      Tensor x = randn(xs, {.dtype = dt}), dy = randn(ys, {.dtype = dt});
      Tensor y = empty(ys, {.dtype = dt}), yd = device_empty(ys, dt);
      avg_pool2d_forward_stub(Device::cpu())(y, x, g);
      emu::kernel(avg_pool2d_forward_stub)(yd, device_copy(x), g);
      expect_close(yd, y, tol(dt), tol(dt), what + " average");
      Tensor dx = empty(xs, {.dtype = dt}), dxd = device_empty(xs, dt);
      avg_pool2d_backward_stub(Device::cpu())(dx, dy, g);
      emu::kernel(avg_pool2d_backward_stub)(dxd, device_copy(dy), g);
      expect_close(dxd, dx, tol(dt), tol(dt), what + " average gradient");
    }
  }
}

TEST_P(Pool, AdaptiveAverageMatchesTheCpu) {
  struct Case {
    int64_t P, H, W, OH, OW;
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Case& c : std::vector<Case>{{2, 7, 9, 3, 4}, {1, 8, 8, 4, 4}, {3, 5, 6, 1, 1}, {1, 3, 4, 5, 7}}) {
      Pool2dGeometry g;
      g.P = c.P, g.H = c.H, g.W = c.W, g.OH = c.OH, g.OW = c.OW;
      const std::string what = std::string(dtype_name(dt)) + " adaptive " + std::to_string(c.H) + "x" +
                               std::to_string(c.W) + " -> " + std::to_string(c.OH) + "x" + std::to_string(c.OW);
      const Shape xs{c.P, c.H, c.W}, ys{c.P, c.OH, c.OW};
      Tensor x = randn(xs, {.dtype = dt}), dy = randn(ys, {.dtype = dt});
      Tensor y = empty(ys, {.dtype = dt}), yd = device_empty(ys, dt);
      adaptive_avg_pool2d_forward_stub(Device::cpu())(y, x, g);
      emu::kernel(adaptive_avg_pool2d_forward_stub)(yd, device_copy(x), g);
      expect_close(yd, y, tol(dt), tol(dt), what);
      Tensor dx = empty(xs, {.dtype = dt}), dxd = device_empty(xs, dt);
      adaptive_avg_pool2d_backward_stub(Device::cpu())(dx, dy, g);
      emu::kernel(adaptive_avg_pool2d_backward_stub)(dxd, device_copy(dy), g);
      expect_close(dxd, dx, tol(dt), tol(dt), what + " gradient");
    }
  }
}

TEST(PoolLimits, AGeometryPast32BitIndexingIsAnError) {
  Pool2dGeometry g = geometry(1, 4, 4, 2, 2, 2, 2, 0, 0, false, true);
  g.W = int64_t{1} << 31;
  Tensor t = device_empty({1}, DType::Float32), i = device_empty({1}, DType::Int64);
  expect_error([&] { emu::kernel(max_pool2d_forward_stub)(t, i, t, g); }, "max_pool2d", "32-bit");
  expect_error([&] { emu::kernel(avg_pool2d_backward_stub)(t, t, g); }, "avg_pool2d_backward", "32-bit");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Pool, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
