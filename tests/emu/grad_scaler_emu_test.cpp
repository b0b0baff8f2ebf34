// Loss scaling decided on the device (layers/optim/grad_scaler.h, Optimizer::step_unless): a
// GradScaler whose losses and parameters are on the emulated CUDA device trains every optimizer
// like the same scaler on the CPU, skipped steps included, while the host never reads device
// memory between scale() and update() (host_wait_count, core/host_waits.h, unchanged: on a GPU, no
// synchronisation). The sequence skips the very first step (SGD's momentum buffer and Adam's bias
// corrections must then start at the next one, counted on the device), grows the scale, skips a
// later step, and ends with an ordinary step() that brings the device's step counts back to the
// host; the optimizers' state_dicts (step counts) and the scalers' states agree at the end.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda/emu/emu_device.h"
#include "core/host_waits.h"
#include "core/ops.h"
#include "layers/optim/adagrad.h"
#include "layers/optim/adam.h"
#include "layers/optim/grad_scaler.h"
#include "layers/optim/rmsprop.h"
#include "layers/optim/sgd.h"

using namespace ember;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct Case {
  std::string name;
  MakeOptimizer make;
};

std::vector<Case> cases() {
  using namespace optim;
  return {
      {"Adam", [](std::vector<Tensor> p) { return std::make_unique<Adam>(std::move(p), AdamOptions{.lr = 1e-2}); }},
      {"AdamW amsgrad",
       [](std::vector<Tensor> p) {
         return std::make_unique<AdamW>(std::move(p), AdamWOptions{.lr = 1e-2, .amsgrad = true});
       }},
      {"SGD momentum dampening",
       [](std::vector<Tensor> p) {
         return std::make_unique<SGD>(std::move(p), SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
       }},
      {"RMSprop centered",
       [](std::vector<Tensor> p) {
         return std::make_unique<RMSprop>(std::move(p), RMSpropOptions{.lr = 1e-2, .momentum = 0.5, .centered = true});
       }},
      {"Adagrad lr_decay",
       [](std::vector<Tensor> p) {
         return std::make_unique<Adagrad>(std::move(p), AdagradOptions{.lr = 0.1, .lr_decay = 0.5});
       }},
  };
}

// One model's copy: its parameters, optimizer and scaler on `dev`.
struct Replica {
  std::vector<Tensor> params;
  std::unique_ptr<optim::Optimizer> opt;
  optim::GradScaler scaler{{.init_scale = 1024.0, .growth_interval = 2}};

  Replica(const std::vector<Tensor>& init, Device dev, const MakeOptimizer& make) {
    for (const Tensor& p : init) params.push_back(p.to(dev).detach().requires_grad_());
    opt = make(params);
  }
  // loss = sum_i sum(p_i * c_i), so each gradient is c_i times the scale.
  void train_step(const std::vector<Tensor>& coeffs) {
    Tensor loss;
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor term = sum(mul(params[i], coeffs[i].to(params[i].device())));
      loss = loss.defined() ? add(loss, term) : term;
    }
    scaler.scale(loss).backward();
    scaler.step(*opt);
    scaler.update();
    opt->zero_grad();
  }
};

// Step k's gradients: finite, except an inf (k == 0) or a NaN (k == 4) in one parameter.
std::vector<Tensor> coefficients(int k, const std::vector<Tensor>& init) {
  std::vector<Tensor> c;
  for (size_t i = 0; i < init.size(); ++i) {
    Tensor ci = add(mul(randn(init[i].shape()), 0.5), 0.1 * (k + 1));
    if (i == 1 && (k == 0 || k == 4)) {
      std::vector<double> v = ci.to_vector<double>();
      v[2] = k == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
      ci = from_vector(v, init[i].shape());
    }
    c.push_back(ci.to(DType::Float32));
  }
  return c;
}

void expect_params_close(const Replica& cpu, const Replica& dev, const std::string& what) {
  for (size_t i = 0; i < cpu.params.size(); ++i) {
    const std::vector<double> a = cpu.params[i].to_vector<double>();
    const std::vector<double> b = dev.params[i].to(Device::cpu()).to_vector<double>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) EXPECT_NEAR(b[j], a[j], 1e-5 * (1 + std::abs(a[j]))) << what << " " << i;
  }
}

TEST(GradScalerOnDevice, EveryOptimizerStepsAndSkipsLikeTheCpuWithoutWaitingForTheDevice) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    manual_seed(5);
    const std::vector<Tensor> init = {randn({7}), randn({3, 4}), zeros({0}), randn({1})};
    Replica cpu(init, Device::cpu(), c.make), dev(init, emu::device(), c.make);
    std::vector<double> before;
    for (int k = 0; k < 7; ++k) {
      const std::vector<Tensor> coeffs = coefficients(k, init);
      cpu.train_step(coeffs);
      std::vector<Tensor> on_device;
      for (const Tensor& ci : coeffs) on_device.push_back(ci.to(emu::device()));
      const uint64_t waits = host_wait_count();
      dev.train_step(on_device);
      EXPECT_EQ(host_wait_count(), waits) << "step " << k << ": the host read device memory";
      EXPECT_EQ(dev.scaler.get_scale(), cpu.scaler.get_scale()) << "step " << k;
      expect_params_close(cpu, dev, "step " + std::to_string(k));
      const std::vector<double> now = dev.params[0].to(Device::cpu()).to_vector<double>();
      if (k == 0) {
        EXPECT_EQ(now, init[0].to_vector<double>()) << "the first step held an inf: skipped";
      }
      if (k == 4) {
        EXPECT_EQ(now, before) << "step 4 held a NaN: skipped";
      }
      before = now;
    }
    // 1024 -> 512 (the inf), 1024 after two clean steps, 512 (the NaN), 1024 after two more.
    EXPECT_EQ(dev.scaler.get_scale(), 1024.0);
    const optim::OptimizerState sc = cpu.opt->state_dict(), sd = dev.opt->state_dict();
    for (size_t i = 0; i < init.size(); ++i) {
      EXPECT_EQ(sd.params[0][i].step, sc.params[0][i].step) << "param " << i;
      EXPECT_EQ(sd.params[0][i].step, 5) << "seven steps, two skipped";
    }
    // An ordinary step after device-decided ones continues from the device's counts.
    for (Replica* r : {&cpu, &dev}) {
      for (size_t i = 0; i < init.size(); ++i) r->params[i].set_grad(ones_like(r->params[i]));
      r->opt->step();
    }
    expect_params_close(cpu, dev, "ordinary step");
    EXPECT_EQ(dev.opt->state_dict().params[0][0].step, 6);
  }
}

// Reading the flag is what found_inf() is for: it says which step was skipped (a host read).
TEST(GradScalerOnDevice, FoundInfReadsTheFlagBack) {
  Tensor w = ones({3}).to(emu::device()).detach().requires_grad_();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::GradScaler s;
  w.set_grad(tensor({1.0f, std::numeric_limits<float>::infinity(), 1.0f}).to(emu::device()));
  EXPECT_FALSE(s.found_inf(opt)) << "not unscaled yet";
  s.step(opt);
  EXPECT_TRUE(s.found_inf(opt));
  EXPECT_EQ(w.to(Device::cpu()).to_vector<double>(), (std::vector<double>{1, 1, 1}));
  s.update();
  EXPECT_EQ(s.get_scale(), 32768.0);
  EXPECT_EQ(s.state_dict().growth_tracker, 0);
}

// Parameters on two devices (one on the CPU, one on the emulated device) with the loss, and so
// the scale, on the CPU: the device's gradients are unscaled there with a copy of the scale and
// their flag joins the CPU's, and the optimizer's skip is the host's (its parameters are not all on
// the flag's device). An inf in the device's gradient skips both parameters; clean steps train as a
// CPU-only run.
TEST(GradScalerOnDevice, ParametersOnTwoDevicesFallBackToTheHostAndStillSkipTogether) {
  const float inf = std::numeric_limits<float>::infinity();
  auto run = [&](bool split) {
    Tensor a = tensor({1.0f, 2.0f}).requires_grad_(), b = tensor({3.0f, -1.0f, 0.5f});
    if (split) b = b.to(emu::device());
    b = b.detach().requires_grad_();
    optim::SGD opt({a, b}, {.lr = 0.1, .momentum = 0.9});
    optim::GradScaler s({.init_scale = 256.0});
    std::vector<double> flags;
    for (int k = 0; k < 4; ++k) {
      Tensor cb = tensor({1.0f, k == 1 ? inf : 0.5f, -2.0f}).to(b.device());
      Tensor loss = add(sum(mul(a, 0.25 * (k + 1))), sum(mul(b, cb)).to(Device::cpu()));
      s.scale(loss).backward();
      s.step(opt);
      flags.push_back(s.found_inf(opt) ? 1.0 : 0.0);
      s.update();
      opt.zero_grad();
    }
    std::vector<double> out = a.to_vector<double>(), bv = b.to(Device::cpu()).to_vector<double>();
    out.insert(out.end(), bv.begin(), bv.end());
    out.insert(out.end(), flags.begin(), flags.end());
    out.push_back(s.get_scale());
    return out;
  };
  const std::vector<double> split = run(true), cpu = run(false);
  ASSERT_EQ(split.size(), cpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(split[i], cpu[i], 1e-6) << "entry " << i;
  EXPECT_EQ(split[5], 0.0);
  EXPECT_EQ(split[6], 1.0) << "step 1's inf on the device skipped the step";
  EXPECT_EQ(split.back(), 128.0);
}

}  // namespace
