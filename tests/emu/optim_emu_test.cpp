// The CUDA fused optimizer updates and clipping helpers (layers/cuda/optim.cu) run by the kernel
// emulator against the CPU kernels: SGD (plain, momentum with its first step, dampening,
// Nesterov, weight decay, maximize), Adam and AdamW (amsgrad), RMSprop (centered, momentum),
// Adagrad, the gradient norm for p = 1, 2, 3, inf, scaling and value clipping, in all three
// thread orders, over several steps so that the state carries over; and the multi-tensor Adam
// step and total gradient norm (many tensors per launch) against the single-tensor ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "emu/emu_test_util.h"
#include "layers/optim/fused_kernels.h"

using namespace ember;
using namespace ember::optim;
using emu_test::device_copy;
using emu_test::expect_close;

namespace {

class Optim : public emu_test::EmulatedKernel {};

double tol(DType dt) {
  return dt == DType::Float32 ? 1e-5 : 1e-12;
}

// A parameter, its gradient and `nstate` zeroed (or random) state tensors, on both sides.
struct State {
  std::vector<Tensor> cpu, dev;
};
State make(int64_t n, DType dt, int nstate) {
  State s;
  for (int k = 0; k < 2 + nstate; ++k) {
    Tensor t = k < 2 ? randn({n}, {.dtype = dt}) : (rand({n}, {.dtype = dt}) * 0.1);
    s.cpu.push_back(t);
    s.dev.push_back(device_copy(t));
  }
  return s;
}

void expect_same(const State& s, double t, const std::string& what) {
  for (size_t k = 0; k < s.cpu.size(); ++k)
    if (k != 1) expect_close(s.dev[k], s.cpu[k], t, t, what + " tensor " + std::to_string(k));
}

}  // namespace

TEST_P(Optim, SgdMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int variant = 0; variant < 4; ++variant) {
      SgdHyper h;
      h.lr = 0.1;
      h.momentum = variant == 0 ? 0.0 : 0.9;
      h.dampening = variant == 2 ? 0.3 : 0.0;
      h.nesterov = variant == 3;
      h.weight_decay = variant >= 2 ? 0.01 : 0.0;
      h.maximize = variant == 1;
      State s = make(1027, dt, 1);
      for (int step = 0; step < 3; ++step) {
        h.init_buffer = step == 0;
        const Tensor buf_c = h.momentum != 0 ? s.cpu[2] : Tensor(), buf_d = h.momentum != 0 ? s.dev[2] : Tensor();
        sgd_step_stub(Device::cpu())(s.cpu[0], s.cpu[1], buf_c, h);
        emu::kernel(sgd_step_stub)(s.dev[0], s.dev[1], buf_d, h);
      }
      expect_same(s, tol(dt), std::string("sgd ") + dtype_name(dt) + " variant " + std::to_string(variant));
    }
  }
}

TEST_P(Optim, AdamAndAdamWMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int variant = 0; variant < 4; ++variant) {
      AdamHyper h;
      h.lr = 1e-2;
      h.beta1 = 0.9;
      h.beta2 = 0.999;
      h.eps = 1e-8;
      h.weight_decay = variant == 0 ? 0.0 : 0.05;
      h.decoupled_weight_decay = variant >= 2;
      h.amsgrad = variant == 3;
      h.maximize = variant == 1;
      State s = make(999, dt, 3);
      for (int step = 1; step <= 3; ++step) {
        h.bias_correction1 = 1.0 - std::pow(h.beta1, step);
        h.bias_correction2 = 1.0 - std::pow(h.beta2, step);
        adam_step_stub(Device::cpu())(s.cpu[0], s.cpu[1], s.cpu[2], s.cpu[3], h.amsgrad ? s.cpu[4] : Tensor(), h);
        emu::kernel(adam_step_stub)(s.dev[0], s.dev[1], s.dev[2], s.dev[3], h.amsgrad ? s.dev[4] : Tensor(), h);
      }
      expect_same(s, 10 * tol(dt), std::string("adam ") + dtype_name(dt) + " variant " + std::to_string(variant));
    }
  }
}

TEST_P(Optim, RmspropAndAdagradMatchTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int variant = 0; variant < 3; ++variant) {
      RmspropHyper h;
      h.lr = 1e-2;
      h.alpha = 0.99;
      h.eps = 1e-8;
      h.weight_decay = variant == 2 ? 0.01 : 0.0;
      h.momentum = variant >= 1 ? 0.9 : 0.0;
      h.centered = variant == 2;
      State s = make(700, dt, 3);
      // A square average that dominates the (small) grad average: centered RMSprop takes
      // sqrt(square_avg - grad_avg^2), which is ill-conditioned when the two are close.
      s.cpu[2] = s.cpu[2] + 1.0;
      s.dev[2] = device_copy(s.cpu[2]);
      for (int step = 0; step < 3; ++step) {
        rmsprop_step_stub(Device::cpu())(s.cpu[0], s.cpu[1], s.cpu[2], h.momentum != 0 ? s.cpu[3] : Tensor(),
                                         h.centered ? s.cpu[4] : Tensor(), h);
        emu::kernel(rmsprop_step_stub)(s.dev[0], s.dev[1], s.dev[2], h.momentum != 0 ? s.dev[3] : Tensor(),
                                       h.centered ? s.dev[4] : Tensor(), h);
      }
      expect_same(s, 10 * tol(dt), std::string("rmsprop ") + dtype_name(dt) + " variant " + std::to_string(variant));
    }
    AdagradHyper a;
    a.clr = 0.05;
    a.eps = 1e-10;
    a.weight_decay = 0.01;
    State s = make(333, dt, 1);
    for (int step = 0; step < 3; ++step) {
      adagrad_step_stub(Device::cpu())(s.cpu[0], s.cpu[1], s.cpu[2], a);
      emu::kernel(adagrad_step_stub)(s.dev[0], s.dev[1], s.dev[2], a);
    }
    expect_same(s, 10 * tol(dt), std::string("adagrad ") + dtype_name(dt));
  }
}

TEST_P(Optim, ClippingHelpersMatchTheCpu) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1, 777, 2100}) {
      Tensor g = randn({n}, {.dtype = dt});
      Tensor gd = device_copy(g);
      for (double p : {1.0, 2.0, 3.0, inf}) {
        const double want = grad_norm_stub(Device::cpu())(g, p);
        const double got = emu::kernel(grad_norm_stub)(gd, p);
        EXPECT_NEAR(got, want, 1e-9 * std::abs(want)) << dtype_name(dt) << " n " << n << " p " << p;
      }
      scale_stub(Device::cpu())(g, 0.37);
      emu::kernel(scale_stub)(gd, 0.37);
      expect_close(gd, g, 0, 0, "scale");
      clip_value_stub(Device::cpu())(g, 0.2);
      emu::kernel(clip_value_stub)(gd, 0.2);
      expect_close(gd, g, 0, 0, "clip");
    }
  }
  Tensor nan_grad = full({300}, 1.0);
  nan_grad.data_ptr<float>()[77] = NAN;
  EXPECT_TRUE(std::isnan(emu::kernel(grad_norm_stub)(device_copy(nan_grad), inf)));
}

// Parameter sizes for the multi-tensor launches: more tensors than one launch's 24 slots, sizes
// that are not multiples of the 8192-element chunk, empty ones, and (in the forward order only,
// it is the largest case) a tensor of more chunks than one launch's 320-block table, which
// continues in the next launch.
std::vector<int64_t> multi_sizes(bool large) {
  std::vector<int64_t> sizes = {1, 0, 1027, 8192, 8193, 20000};
  for (int i = 0; i < 22; ++i) sizes.push_back(31 + 97 * i);
  if (large) sizes.push_back(320 * 8192 + 1000);
  return sizes;
}

TEST_P(Optim, MultiTensorAdamMatchesTheSingleTensorKernelAndTheCpu) {
  const bool forward = GetParam().order == emu::ThreadOrder::Forward;
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int variant = 0; variant < 3; ++variant) {
      const bool large = forward && dt == DType::Float32 && variant == 0;  // once is enough
      AdamHyper h;
      h.lr = 1e-2;
      h.beta1 = 0.9;
      h.beta2 = 0.999;
      h.eps = 1e-8;
      h.weight_decay = variant == 0 ? 0.0 : 0.05;
      h.decoupled_weight_decay = variant == 2;
      h.amsgrad = variant == 1;
      std::vector<State> cpu, single, multi;
      for (int64_t n : multi_sizes(large)) {
        cpu.push_back(make(n, dt, 3));
        State one, many;
        for (const Tensor& t : cpu.back().cpu) {
          one.dev.push_back(device_copy(t));
          many.dev.push_back(device_copy(t));
        }
        single.push_back(one);
        multi.push_back(many);
      }
      for (int step = 1; step <= 2; ++step) {
        std::vector<AdamTensors> ts;
        for (size_t i = 0; i < cpu.size(); ++i) {
          // Each parameter its own step count (as after a parameter joined late): per-tensor bias
          // corrections.
          const int own = step + static_cast<int>(i % 3);
          AdamHyper hi = h;
          hi.bias_correction1 = 1.0 - std::pow(h.beta1, own);
          hi.bias_correction2 = 1.0 - std::pow(h.beta2, own);
          const State& c = cpu[i];
          adam_step_stub(Device::cpu())(c.cpu[0], c.cpu[1], c.cpu[2], c.cpu[3], h.amsgrad ? c.cpu[4] : Tensor(), hi);
          const State& o = single[i];
          emu::kernel(adam_step_stub)(o.dev[0], o.dev[1], o.dev[2], o.dev[3], h.amsgrad ? o.dev[4] : Tensor(), hi);
          const State& m = multi[i];
          ts.push_back({m.dev[0], m.dev[1], m.dev[2], m.dev[3], h.amsgrad ? m.dev[4] : Tensor(), hi.bias_correction1,
                        hi.bias_correction2});
        }
        emu::kernel(adam_multi_step_stub)(ts, h);
      }
      for (size_t i = 0; i < cpu.size(); ++i) {
        const std::string what = std::string("adam multi ") + dtype_name(dt) + " variant " + std::to_string(variant) +
                                 " tensor " + std::to_string(i);
        State got = multi[i], want = cpu[i];
        want.dev = got.dev;
        expect_same(want, 10 * tol(dt), what);
        // The same device code as the single-tensor kernel: the same bits.
        for (size_t k = 0; k < got.dev.size(); ++k)
          if (k != 1)
            expect_close(got.dev[k], single[i].dev[k], 0, 0, what + " vs single, tensor " + std::to_string(k));
      }
    }
  }
}

TEST_P(Optim, TotalGradNormOverManyTensorsMatchesThePerTensorCpuSum) {
  const double inf = std::numeric_limits<double>::infinity();
  const bool large = GetParam().order == emu::ThreadOrder::Forward;
  std::vector<Tensor> cpu, dev;
  int i = 0;
  for (int64_t n : multi_sizes(large)) {
    // Both dtypes in one list (the CUDA kernel takes float32 first, then float64).
    const DType dt = i++ % 2 ? DType::Float64 : DType::Float32;
    cpu.push_back(randn({n}, {.dtype = dt}));
    dev.push_back(device_copy(cpu.back()));
  }
  for (double p : {1.0, 2.0, 3.0, inf}) {
    double want = 0;
    for (const Tensor& t : cpu) {
      const double v = grad_norm_stub(Device::cpu())(t, p);
      want = std::isinf(p) ? std::max(want, v) : want + v;
    }
    const double got = emu::kernel(grad_norm_total_stub)(dev, p);
    EXPECT_NEAR(got, want, 1e-9 * std::abs(want)) << "p " << p;
  }
  EXPECT_EQ(emu::kernel(grad_norm_total_stub)(std::vector<Tensor>{device_copy(zeros({0}))}, 2.0), 0.0);
  Tensor nan_grad = full({300}, 1.0);
  nan_grad.data_ptr<float>()[77] = NAN;
  EXPECT_TRUE(std::isnan(emu::kernel(grad_norm_total_stub)(std::vector<Tensor>{dev[2], device_copy(nan_grad)}, inf)));
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Optim, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
