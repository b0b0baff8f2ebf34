// The CUDA softmax family (core/cuda/softmax.cu) run by the kernel emulator against the CPU
// kernels: softmax and log_softmax forward and backward and logsumexp, over the last dim (rows)
// and a middle dim (columns), with sizes that are not multiples of the warp or block, large
// logits, -inf entries and an empty reduced dim, in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/reduce_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class Softmax : public emu_test::EmulatedKernel {};

const std::vector<Shape> kShapes = {{3, 10, 1}, {2, 37, 1}, {2, 1000, 1}, {1, 1, 1}, {2, 7, 5}, {3, 33, 40}};

double tol(DType dt) {
  return dt == DType::Float32 ? 2e-5 : 1e-11;
}

}  // namespace

TEST_P(Softmax, ForwardAndBackwardMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Shape& s : kShapes) {
      Tensor x = (randn(s, {.dtype = DType::Float64}) * 5.0).to(dt);
      if (s[1] > 5) x.select(1, 3).fill_(dt == DType::Float32 ? 80.0 : 700.0);  // large: must not overflow
      if (s[1] > 5) x.select(1, 4).fill_(-std::numeric_limits<double>::infinity());
      Tensor g = randn(s, {.dtype = dt});
      Tensor xd = device_copy(x), gd = device_copy(g);
      for (bool log : {false, true}) {
        const std::string what = std::string(dtype_name(dt)) + (log ? " log_softmax " : " softmax ") + shape_str(s);
        Tensor want = empty(s, {.dtype = dt});
        softmax_stub(Device::cpu())(log, want, x);
        Tensor got = device_empty(s, dt);
        emu::kernel(softmax_stub)(log, got, xd);
        expect_close(got, want, tol(dt), tol(dt), what);
        Tensor want_g = empty(s, {.dtype = dt});
        softmax_grad_stub(Device::cpu())(log, want_g, g, want);
        Tensor got_g = device_empty(s, dt);
        emu::kernel(softmax_grad_stub)(log, got_g, gd, device_copy(want));
        expect_close(got_g, want_g, tol(dt), tol(dt), what + " backward");
      }
      Tensor want_l = empty({s[0], s[2]}, {.dtype = dt});
      logsumexp_stub(Device::cpu())(want_l, x);
      Tensor got_l = device_empty({s[0], s[2]}, dt);
      emu::kernel(logsumexp_stub)(got_l, xd);
      expect_close(got_l, want_l, tol(dt), tol(dt), std::string("logsumexp ") + shape_str(s));
    }
  }
}

TEST_P(Softmax, LogSumExpOfAllMinusInfinityAndOfAnEmptyDim) {
  for (const Shape& s : {Shape{2, 40, 1}, Shape{2, 40, 3}, Shape{2, 0, 1}}) {
    Tensor x = full(s, -std::numeric_limits<double>::infinity());
    Tensor want = empty({s[0], s[2]});
    logsumexp_stub(Device::cpu())(want, x);
    Tensor got = device_empty({s[0], s[2]}, DType::Float32);
    emu::kernel(logsumexp_stub)(got, device_copy(x));
    expect_close(got, want, 0, 0, shape_str(s));
    EXPECT_EQ(got.to_vector<double>()[0], -std::numeric_limits<double>::infinity());
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Softmax, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
