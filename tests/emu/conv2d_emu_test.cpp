// The CUDA conv2d implicit GEMMs (core/cuda/conv2d.cu) run by the kernel emulator against the CPU
// kernels: forward, backward-data (also conv_transpose2d's forward, with its per-channel bias) and
// backward-filter with the bias gradient, over strides, padding, dilation, groups (depthwise
// too), rectangular kernels, sizes that are not multiples of the 64x64x16 tile, a filter gradient
// split over K, input rows no output reads, and an empty batch, in all three thread orders.
#include <gtest/gtest.h>

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

class Conv2d : public emu_test::EmulatedKernel {};

ConvGeometry geometry(int64_t N, int64_t C, int64_t H, int64_t W, int64_t OC, int64_t KH, int64_t KW, int64_t s,
                      int64_t ph, int64_t pw, int64_t dil, int64_t groups) {
  ConvGeometry g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.OC = OC, g.KH = KH, g.KW = KW;
  g.sh = s, g.sw = s, g.ph = ph, g.pw = pw, g.dh = dil, g.dw = dil, g.groups = groups;
  g.OH = (H + 2 * ph - dil * (KH - 1) - 1) / s + 1;
  g.OW = (W + 2 * pw - dil * (KW - 1) - 1) / s + 1;
  return g;
}

std::string name_of(const ConvGeometry& g) {
  std::ostringstream os;
  os << "N" << g.N << " C" << g.C << " " << g.H << "x" << g.W << " OC" << g.OC << " k" << g.KH << "x" << g.KW << " s"
     << g.sh << " p" << g.ph << "," << g.pw << " d" << g.dh << " g" << g.groups;
  return os.str();
}

const std::vector<ConvGeometry>& geometries() {
  static const std::vector<ConvGeometry> v = {
      geometry(2, 3, 7, 7, 5, 3, 3, 1, 1, 1, 1, 1),     // "same" 3x3
      geometry(1, 4, 9, 8, 6, 3, 2, 2, 1, 0, 2, 2),     // stride, dilation, groups, rectangular kernel
      geometry(2, 4, 6, 6, 8, 3, 3, 1, 0, 0, 1, 4),     // depthwise with multiplier 2
      geometry(2, 8, 12, 12, 70, 3, 3, 1, 1, 1, 1, 1),  // two M tiles, K > 16, filter gradient split over K
      geometry(1, 2, 8, 7, 3, 3, 3, 2, 0, 0, 1, 1),     // last input row and column read by no output
      geometry(3, 5, 5, 9, 4, 1, 1, 2, 0, 0, 1, 1),     // 1x1, stride 2
      geometry(0, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1),     // empty batch
  };
  return v;
}

double tol(DType dt) {
  return dt == DType::Float32 ? 1e-4 : 1e-10;
}

}  // namespace

TEST_P(Conv2d, ForwardAndBothBackwardsMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const ConvGeometry& g : geometries()) {
      const std::string what = std::string(dtype_name(dt)) + " " + name_of(g);
      const Shape xs{g.N, g.C, g.H, g.W}, ws{g.OC, g.C / g.groups, g.KH, g.KW}, ys{g.N, g.OC, g.OH, g.OW};
      Tensor x = randn(xs, {.dtype = dt}), w = randn(ws, {.dtype = dt}), b = randn({g.OC}, {.dtype = dt});
      Tensor dy = randn(ys, {.dtype = dt}), bin = randn({g.C}, {.dtype = dt});
      Tensor xd = device_copy(x), wd = device_copy(w), dyd = device_copy(dy);

      for (bool with_bias : {true, false}) {
        Tensor y = empty(ys, {.dtype = dt});
        conv2d_forward_stub(Device::cpu())(y, x, w, with_bias ? b : Tensor(), g);
        Tensor yd = device_empty(ys, dt);
        emu::kernel(conv2d_forward_stub)(yd, xd, wd, with_bias ? device_copy(b) : Tensor(), g);
        expect_close(yd, y, tol(dt), tol(dt), what + " forward" + (with_bias ? " bias" : ""));

        Tensor dx = empty(xs, {.dtype = dt});
        conv2d_backward_input_stub(Device::cpu())(dx, dy, w, with_bias ? bin : Tensor(), g);
        Tensor dxd = device_empty(xs, dt);
        emu::kernel(conv2d_backward_input_stub)(dxd, dyd, wd, with_bias ? device_copy(bin) : Tensor(), g);
        expect_close(dxd, dx, tol(dt), tol(dt), what + " backward-data" + (with_bias ? " bias" : ""));
      }

      Tensor dw = empty(ws, {.dtype = dt}), db = empty({g.OC}, {.dtype = dt});
      conv2d_backward_weight_stub(Device::cpu())(dw, db, dy, x, g);
      Tensor dwd = device_empty(ws, dt), dbd = device_empty({g.OC}, dt);
      emu::kernel(conv2d_backward_weight_stub)(dwd, dbd, dyd, xd, g);
      expect_close(dwd, dw, tol(dt), tol(dt), what + " backward-filter");
      expect_close(dbd, db, tol(dt), tol(dt), what + " bias gradient");
    }
  }
}

TEST_P(Conv2d, FilterGradientAloneAndBiasGradientAlone) {
  const ConvGeometry g = geometry(2, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1);
  Tensor x = randn({2, 3, 6, 5}), dy = randn({2, 4, 6, 5});
  Tensor dw = empty({4, 3, 3, 3}), db = empty({4});
  conv2d_backward_weight_stub(Device::cpu())(dw, db, dy, x, g);
  Tensor dwd = device_empty({4, 3, 3, 3}, DType::Float32), dbd = device_empty({4}, DType::Float32);
  emu::kernel(conv2d_backward_weight_stub)(dwd, Tensor(), device_copy(dy), device_copy(x), g);
  emu::kernel(conv2d_backward_weight_stub)(Tensor(), dbd, device_copy(dy), device_copy(x), g);
  expect_close(dwd, dw, 1e-4, 1e-4, "filter gradient alone");
  expect_close(dbd, db, 1e-4, 1e-4, "bias gradient alone");
}

// conv_transpose2d (core/ops/conv.cpp) runs its forward as backward-data with its bias, its
// input gradient as forward and its weight gradient as backward-filter with the roles of input
// and output gradient swapped; here with stride 2, padding 1 and output_padding 1 (the last
// output row and column are reached by no input pixel), groups 2.
TEST_P(Conv2d, ConvTransposeRolesMatchTheCpu) {
  // Transpose input [2, 4, 5, 4] -> output [2, 6, H, W]; as a conv, the output is its input.
  const int64_t n = 2, cin = 4, ih = 5, iw = 4, cout = 6, k = 3, s = 2, p = 1, op = 1, groups = 2;
  ConvGeometry g;
  g.N = n, g.C = cout, g.OC = cin, g.KH = k, g.KW = k, g.sh = s, g.sw = s, g.ph = p, g.pw = p, g.groups = groups;
  g.OH = ih, g.OW = iw;
  g.H = (ih - 1) * s - 2 * p + (k - 1) + op + 1, g.W = (iw - 1) * s - 2 * p + (k - 1) + op + 1;
  const Shape xs{n, cin, ih, iw}, ys{n, cout, g.H, g.W}, ws{cin, cout / groups, k, k};
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = randn(xs, {.dtype = dt}), w = randn(ws, {.dtype = dt}), b = randn({cout}, {.dtype = dt});
    Tensor gy = randn(ys, {.dtype = dt});
    Tensor y = empty(ys, {.dtype = dt}), yd = device_empty(ys, dt);
    conv2d_backward_input_stub(Device::cpu())(y, x, w, b, g);
    emu::kernel(conv2d_backward_input_stub)(yd, device_copy(x), device_copy(w), device_copy(b), g);
    expect_close(yd, y, tol(dt), tol(dt), "transpose forward");
    Tensor gx = empty(xs, {.dtype = dt}), gxd = device_empty(xs, dt);
    conv2d_forward_stub(Device::cpu())(gx, gy, w, Tensor(), g);
    emu::kernel(conv2d_forward_stub)(gxd, device_copy(gy), device_copy(w), Tensor(), g);
    expect_close(gxd, gx, tol(dt), tol(dt), "transpose input gradient");
    Tensor gw = empty(ws, {.dtype = dt}), gwd = device_empty(ws, dt);
    conv2d_backward_weight_stub(Device::cpu())(gw, Tensor(), x, gy, g);
    emu::kernel(conv2d_backward_weight_stub)(gwd, Tensor(), device_copy(x), device_copy(gy), g);
    expect_close(gwd, gw, tol(dt), tol(dt), "transpose weight gradient");
  }
}

// The kernels index in 32 bits; a geometry past that is refused before any memory is touched.
TEST(Conv2dLimits, AGeometryPast32BitIndexingIsAnError) {
  ConvGeometry g = geometry(1, 1, 128, 128, 1, 1, 1, 1, 0, 0, 1, 1);
  g.N = int64_t{1} << 18;  // 2^32 output pixels
  Tensor t = device_empty({1}, DType::Float32);
  expect_error([&] { emu::kernel(conv2d_forward_stub)(t, t, t, Tensor(), g); }, "conv2d", "32-bit");
  expect_error([&] { emu::kernel(conv2d_backward_input_stub)(t, t, t, Tensor(), g); }, "conv2d_backward_input",
               "32-bit");
  expect_error([&] { emu::kernel(conv2d_backward_weight_stub)(t, Tensor(), t, t, g); }, "conv2d_backward_weight",
               "32-bit");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Conv2d, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
