// The CUDA batch norm (core/cuda/batch_norm.cu) run by the kernel emulator against the CPU
// kernel: training (Welford statistics, running-statistics update) and evaluation forward, with
// and without weight, bias and running statistics, and the backward with every subset of
// gradients wanted, over [N, C, S] and [N, C] inputs, a channel of a single value, channels with
// more elements than the block has threads, and a large mean (where a sum of squares would
// cancel), float and double, in all three thread orders.
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
using test_util::expect_error;

namespace {

class BatchNorm : public emu_test::EmulatedKernel {};

struct Case {
  int64_t N, C, S;
  double offset;  // added to the input: a large mean
};

const std::vector<Case>& cases() {
  static const std::vector<Case> v = {{4, 3, 5, 0}, {7, 5, 1, 0}, {1, 2, 1, 0}, {3, 2, 97, 0}, {5, 2, 3, 1000}};
  return v;
}

double tol(DType dt) {
  return dt == DType::Float32 ? 1e-4 : 1e-10;
}

Tensor maybe(const Tensor& t, bool on) {
  return on ? device_copy(t) : Tensor();
}

}  // namespace

TEST_P(BatchNorm, ForwardMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Case& k : cases()) {
      for (int mode = 0; mode < 4; ++mode) {
        // 0: training with everything; 1: training, no affine, no running stats; 2: eval; 3: eval, no affine
        const bool training = mode < 2, affine = mode % 2 == 0, running = mode != 1;
        const std::string what = std::string(dtype_name(dt)) + " N" + std::to_string(k.N) + " C" + std::to_string(k.C) +
                                 " S" + std::to_string(k.S) + " mode" + std::to_string(mode);
        const Shape xs{k.N, k.C, k.S};
        Tensor x = randn(xs, {.dtype = dt});
        x.add_(k.offset);
        Tensor w = randn({k.C}, {.dtype = dt}), b = randn({k.C}, {.dtype = dt});
        Tensor rm = randn({k.C}, {.dtype = dt}), rv = rand({k.C}, {.dtype = dt});
        rv.add_(0.5);
        BatchNormArgs args;
        args.training = training, args.momentum = 0.2, args.eps = 1e-5;

        Tensor y = empty(xs, {.dtype = dt}), sm = empty({k.C}, {.dtype = DType::Float64}),
               si = empty({k.C}, {.dtype = DType::Float64});
        Tensor rm_cpu = rm.clone(), rv_cpu = rv.clone();
        batch_norm_forward_stub(Device::cpu())(y, sm, si, x, affine ? w : Tensor(), affine ? b : Tensor(),
                                               running ? rm_cpu : Tensor(), running ? rv_cpu : Tensor(), args);
        Tensor yd = device_empty(xs, dt), smd = device_empty({k.C}, DType::Float64),
               sid = device_empty({k.C}, DType::Float64);
        Tensor rmd = device_copy(rm), rvd = device_copy(rv);
        emu::kernel(batch_norm_forward_stub)(yd, smd, sid, device_copy(x), maybe(w, affine), maybe(b, affine),
                                             running ? rmd : Tensor(), running ? rvd : Tensor(), args);
        expect_close(yd, y, tol(dt), tol(dt), what + " output");
        expect_close(smd, sm, 1e-12, 1e-12 * (1 + k.offset), what + " save_mean");
        expect_close(sid, si, 1e-9, 1e-9, what + " save_invstd");
        if (running) {
          expect_close(rmd, rm_cpu, tol(dt), tol(dt), what + " running_mean");
          expect_close(rvd, rv_cpu, tol(dt), tol(dt), what + " running_var");
        }
      }
    }
  }
}

TEST_P(BatchNorm, BackwardMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Case& k : cases()) {
      for (bool training : {true, false}) {
        const Shape xs{k.N, k.C, k.S};
        Tensor x = randn(xs, {.dtype = dt});
        x.add_(k.offset);
        Tensor dy = randn(xs, {.dtype = dt}), w = randn({k.C}, {.dtype = dt});
        // The statistics as the forward saves them.
        Tensor sm = empty({k.C}, {.dtype = DType::Float64}), si = empty({k.C}, {.dtype = DType::Float64});
        Tensor rm = zeros({k.C}, {.dtype = dt}), rv = ones({k.C}, {.dtype = dt});
        BatchNormArgs args;
        args.training = training;
        batch_norm_forward_stub(Device::cpu())(empty(xs, {.dtype = dt}), sm, si, x, w, Tensor(), rm, rv, args);
        // All three gradients, grad_input alone, and the parameter gradients alone.
        for (int want : {7, 1, 6}) {
          const bool gi_on = want & 1, gw_on = want & 2, gb_on = want & 4;
          for (bool affine : {true, false}) {
            const std::string what = std::string(dtype_name(dt)) + " N" + std::to_string(k.N) + " C" +
                                     std::to_string(k.C) + " S" + std::to_string(k.S) +
                                     (training ? " train" : " eval") + " want" + std::to_string(want) +
                                     (affine ? " affine" : "");
            Tensor gi = empty(xs, {.dtype = dt}), gw = empty({k.C}, {.dtype = dt}), gb = empty({k.C}, {.dtype = dt});
            batch_norm_backward_stub(Device::cpu())(gi_on ? gi : Tensor(), gw_on ? gw : Tensor(), gb_on ? gb : Tensor(),
                                                    dy, x, affine ? w : Tensor(), sm, si, training);
            Tensor gid = device_empty(xs, dt), gwd = device_empty({k.C}, dt), gbd = device_empty({k.C}, dt);
            emu::kernel(batch_norm_backward_stub)(gi_on ? gid : Tensor(), gw_on ? gwd : Tensor(),
                                                  gb_on ? gbd : Tensor(), device_copy(dy), device_copy(x),
                                                  maybe(w, affine), device_copy(sm), device_copy(si), training);
            if (gi_on) expect_close(gid, gi, tol(dt), tol(dt), what + " grad_input");
            if (gw_on) expect_close(gwd, gw, tol(dt), tol(dt) * (1 + k.offset), what + " grad_weight");
            if (gb_on) expect_close(gbd, gb, tol(dt), tol(dt), what + " grad_bias");
          }
        }
      }
    }
  }
}

TEST(BatchNormErrors, EvaluationWithoutRunningStatisticsIsAnError) {
  Tensor x = device_copy(randn({2, 3, 4})), y = device_empty({2, 3, 4}, DType::Float32);
  Tensor sm = device_empty({3}, DType::Float64), si = device_empty({3}, DType::Float64);
  BatchNormArgs args;
  args.training = false;
  expect_error(
      [&] { emu::kernel(batch_norm_forward_stub)(y, sm, si, x, Tensor(), Tensor(), Tensor(), Tensor(), args); },
      "batch_norm", "running_mean");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, BatchNorm, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
