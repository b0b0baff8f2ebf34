// The CUDA softmax-cross-entropy (core/cuda/cross_entropy.cu) run by the kernel emulator against
// the CPU kernels: class and probability targets, [N, C] and [N, C, S] logits, class weights,
// label smoothing, ignore_index, an expanded grad_loss with a mean divisor, and the error for an
// out-of-range target, in all three thread orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/nn_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class CrossEntropy : public emu_test::EmulatedKernel {};

Tensor maybe_copy(const Tensor& t) {
  return t.defined() ? device_copy(t) : Tensor();
}

}  // namespace

TEST_P(CrossEntropy, ForwardAndBackwardMatchTheCpu) {
  struct Case {
    int64_t N, C, S;
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    const double tol = dt == DType::Float32 ? 2e-5 : 1e-11;
    for (const Case& k : {Case{9, 10, 1}, Case{5, 37, 1}, Case{3, 70, 1}, Case{4, 5, 3}}) {
      for (bool prob : {false, true}) {
        for (bool weighted : {false, true}) {
          for (double ls : {0.0, 0.1}) {
            if (prob && ls > 0) continue;  // the op smooths probability targets itself
            const std::string what = std::string(dtype_name(dt)) + " N" + std::to_string(k.N) + " C" +
                                     std::to_string(k.C) + " S" + std::to_string(k.S) + (prob ? " prob" : " class") +
                                     (weighted ? " weighted" : "") + (ls > 0 ? " smoothed" : "");
            CrossEntropyArgs a;
            a.ignore_index = -100;
            a.label_smoothing = ls;
            a.prob_target = prob;
            Tensor x = (randn({k.N, k.C, k.S}, {.dtype = DType::Float64}) * 3.0).to(dt);
            Tensor target;
            if (prob) {
              target = softmax(randn({k.N, k.C, k.S}, {.dtype = dt}), 1);
            } else {
              target = randint(0, k.C, {k.N, k.S});
              target.data_ptr<int64_t>()[1] = -100;  // one ignored sample
            }
            Tensor w = weighted ? (rand({k.C}, {.dtype = DType::Float64}) + 0.5).to(dt) : Tensor();
            Tensor loss = empty({k.N, k.S}, {.dtype = dt}), lse = empty({k.N, k.S}, {.dtype = dt}),
                   tw = empty({}, {.dtype = dt});
            cross_entropy_forward_stub(Device::cpu())(loss, lse, tw, x, target, w, a);
            Tensor xd = device_copy(x), td = device_copy(target), wd = maybe_copy(w);
            Tensor gl = device_empty({k.N, k.S}, dt), gs = device_empty({k.N, k.S}, dt), gtw = device_empty({}, dt);
            emu::kernel(cross_entropy_forward_stub)(gl, gs, gtw, xd, td, wd, a);
            expect_close(gl, loss, tol, tol, what + " loss");
            expect_close(gs, lse, tol, tol, what + " lse");
            if (!prob) expect_close(gtw, tw, tol, tol, what + " total weight");

            // Backward with a mean-style divisor and a broadcast grad_loss (stride 0).
            Tensor g0 = full({}, 0.7, {.dtype = dt});
            Tensor div = full({}, 3.0, {.dtype = dt});
            Tensor gx = empty({k.N, k.C, k.S}, {.dtype = dt});
            Tensor gt = prob ? empty({k.N, k.C, k.S}, {.dtype = dt}) : Tensor();
            cross_entropy_backward_stub(Device::cpu())(gx, gt, g0.expand({k.N, k.S}), div, x, lse, target, w, a);
            Tensor dgx = device_empty({k.N, k.C, k.S}, dt);
            Tensor dgt = prob ? device_empty({k.N, k.C, k.S}, dt) : Tensor();
            emu::kernel(cross_entropy_backward_stub)(dgx, dgt, device_copy(g0).expand({k.N, k.S}), device_copy(div), xd,
                                                     device_copy(lse), td, wd, a);
            expect_close(dgx, gx, tol, tol, what + " grad logits");
            if (prob) expect_close(dgt, gt, tol, tol, what + " grad target");
          }
        }
      }
    }
  }
}

TEST(CrossEntropyErrors, OutOfRangeTargetIsReported) {
  Tensor x = device_copy(randn({4, 6, 1}));
  Tensor t = device_copy(tensor({1, 2, 6, 0}, {.dtype = DType::Int64}).view({4, 1}));
  Tensor loss = device_empty({4, 1}, DType::Float32), lse = device_empty({4, 1}, DType::Float32),
         tw = device_empty({}, DType::Float32);
  test_util::expect_error([&] { emu::kernel(cross_entropy_forward_stub)(loss, lse, tw, x, t, Tensor(), {}); },
                          "cross_entropy", "target 6 is out of range for 6 classes");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, CrossEntropy, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
