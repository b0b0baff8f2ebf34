// The CUDA layer norm (core/cuda/layer_norm.cu) run by the kernel emulator against the CPU
// kernels: forward (output, mean, rstd) and backward (input, weight and bias gradients), with and
// without affine parameters, rows shorter and longer than a warp and not multiples of the block,
// rows far from zero, enough rows to split the weight and bias gradients into row slices, in all
// three thread orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/nn_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class LayerNorm : public emu_test::EmulatedKernel {};

double tol(DType dt) {
  return dt == DType::Float32 ? 3e-5 : 1e-10;
}

}  // namespace

TEST_P(LayerNorm, ForwardAndBackwardMatchTheCpu) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1},   {3, 7}, {5, 33},  {2, 100},
                                                           {4, 600}, {0, 5}, {130, 24}};
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (auto [M, D] : shapes) {
      for (bool affine : {true, false}) {
        const std::string what = std::string(dtype_name(dt)) + " [" + std::to_string(M) + ", " + std::to_string(D) +
                                 "]" + (affine ? " affine" : "");
        Tensor x = (randn({M, D}, {.dtype = DType::Float64}) * 3.0 + 50.0).to(dt);  // far from zero
        Tensor w = affine ? randn({D}, {.dtype = dt}) : Tensor();
        Tensor b = affine ? randn({D}, {.dtype = dt}) : Tensor();
        Tensor g = randn({M, D}, {.dtype = dt});
        const double eps = 1e-5;
        Tensor y = empty({M, D}, {.dtype = dt}), m = empty({M}, {.dtype = DType::Float64}),
               r = empty({M}, {.dtype = DType::Float64});
        layer_norm_forward_stub(Device::cpu())(y, m, r, x, w, b, eps);
        Tensor yd = device_empty({M, D}, dt), md = device_empty({M}, DType::Float64),
               rd = device_empty({M}, DType::Float64);
        Tensor xd = device_copy(x), wd = affine ? device_copy(w) : Tensor(), bd = affine ? device_copy(b) : Tensor();
        emu::kernel(layer_norm_forward_stub)(yd, md, rd, xd, wd, bd, eps);
        expect_close(yd, y, tol(dt), tol(dt), what + " out");
        expect_close(md, m, 1e-12, 1e-12, what + " mean");
        expect_close(rd, r, 1e-9, 1e-12, what + " rstd");

        Tensor gi = empty({M, D}, {.dtype = dt});
        Tensor gw = affine ? empty({D}, {.dtype = dt}) : Tensor(), gb = affine ? empty({D}, {.dtype = dt}) : Tensor();
        layer_norm_backward_stub(Device::cpu())(gi, gw, gb, g, x, w, m, r);
        Tensor gid = device_empty({M, D}, dt);
        Tensor gwd = affine ? device_empty({D}, dt) : Tensor(), gbd = affine ? device_empty({D}, dt) : Tensor();
        emu::kernel(layer_norm_backward_stub)(gid, gwd, gbd, device_copy(g), xd, wd, device_copy(m), device_copy(r));
        expect_close(gid, gi, 20 * tol(dt), 20 * tol(dt), what + " grad_input");
        if (affine) {
          expect_close(gwd, gw, tol(dt), tol(dt), what + " grad_weight");
          expect_close(gbd, gb, tol(dt), tol(dt), what + " grad_bias");
        }
      }
    }
  }
}

TEST_P(LayerNorm, BackwardComputesOnlyTheWantedGradients) {
  Tensor x = randn({6, 45}), w = randn({45}), g = randn({6, 45});
  Tensor m = empty({6}, {.dtype = DType::Float64}), r = empty({6}, {.dtype = DType::Float64});
  layer_norm_forward_stub(Device::cpu())(empty({6, 45}), m, r, x, w, Tensor(), 1e-5);
  Tensor gw = empty({45});
  layer_norm_backward_stub(Device::cpu())(Tensor(), gw, Tensor(), g, x, w, m, r);
  Tensor gwd = device_empty({45}, DType::Float32);
  emu::kernel(layer_norm_backward_stub)(Tensor(), gwd, Tensor(), device_copy(g), device_copy(x), device_copy(w),
                                        device_copy(m), device_copy(r));
  expect_close(gwd, gw, 3e-5, 3e-5, "grad_weight alone");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, LayerNorm, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
