// optim::GradScaler: growth after growth_interval clean steps, backoff and a skipped step on
// inf/NaN, unscale_ before clipping (once), the disabled pass-through, its state in checkpoints
// (exact resume; older files without it still load), and the reason it exists: a float16 run
// whose gradients underflow to zero without it and trains like float32 with it.
#include "layers/optim/grad_scaler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "core/ops.h"
#include "layers/checkpoint.h"
#include "layers/functional.h"
#include "layers/linear.h"
#include "layers/optim/clip_grad.h"
#include "layers/optim/fused_kernels.h"
#include "layers/optim/sgd.h"
#include "test_helpers.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

// Gives w the gradient S * g, as backward of a scaled loss would.
void set_scaled_grad(Tensor& w, const Tensor& g, const optim::GradScaler& s) {
  w.set_grad(mul(g, s.get_scale()));
}

// Per process: ctest runs this binary's CPU-level variants of a test at the same time.
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_grad_scaler_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace

TEST(GradScaler, DefaultsGrowAfter2000CleanSteps) {
  Tensor w = zeros({3}).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.0});
  optim::GradScaler s;
  EXPECT_EQ(s.get_scale(), 65536.0);
  for (int i = 0; i < 1999; ++i) {
    set_scaled_grad(w, ones({3}), s);
    s.step(opt);
    EXPECT_FALSE(s.found_inf(opt)) << "a clean step";
    s.update();
  }
  EXPECT_EQ(s.get_scale(), 65536.0);
  EXPECT_EQ(s.growth_tracker(), 1999);
  set_scaled_grad(w, ones({3}), s);
  s.step(opt);
  s.update();
  EXPECT_EQ(s.get_scale(), 131072.0);
  EXPECT_EQ(s.growth_tracker(), 0);
}

TEST(GradScaler, InfOrNaNSkipsTheStepAndBacksOff) {
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    Tensor w = ones({2}).requires_grad_();
    optim::SGD opt({w}, {.lr = 1.0});
    optim::GradScaler s({.growth_interval = 3});
    set_scaled_grad(w, ones({2}), s);
    s.step(opt);
    s.update();  // one clean step: w moved, tracker 1
    EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0, 0}));
    w.set_grad(tensor({1.0, bad}));
    s.step(opt);
    EXPECT_TRUE(s.found_inf(opt));
    EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{0, 0})) << "the step was skipped";
    s.update();
    EXPECT_EQ(s.get_scale(), 32768.0);
    EXPECT_EQ(s.growth_tracker(), 0);
  }
}

// The check covers every gradient, not the last one read: an inf in the first of three parameters,
// or a NaN in the middle one, with finite gradients after it, still skips the step.
TEST(GradScaler, ABadGradientAnywhereAmongSeveralSkipsTheStep) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int bad = 0; bad < 3; ++bad) {
    Tensor a = ones({2}).requires_grad_(), b = ones({3}).requires_grad_(), c = ones({1}).requires_grad_();
    optim::SGD opt({a, b, c}, {.lr = 1.0});
    optim::GradScaler s;
    a.set_grad(bad == 0 ? tensor({1.0, inf}) : ones({2}));
    b.set_grad(bad == 1 ? tensor({1.0, std::nan(""), 1.0}) : ones({3}));
    c.set_grad(bad == 2 ? tensor({-inf}) : ones({1}));
    s.step(opt);
    EXPECT_TRUE(s.found_inf(opt)) << "bad gradient " << bad;
    EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1, 1})) << "the step was skipped";
    s.update();
    EXPECT_EQ(s.get_scale(), 32768.0);
  }
}

// unscale_ gives the true gradients (a power-of-two scale divides exactly), clipping sees them,
// and step() does not divide again; a second unscale_ in one step is refused.
TEST(GradScaler, UnscaleBeforeClippingOnce) {
  Tensor w = zeros({2}).requires_grad_();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::GradScaler s;
  set_scaled_grad(w, tensor({3.0, 4.0}), s);
  s.unscale_(opt);
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_NEAR(optim::clip_grad_norm_({w}, 1.0), 5.0, 1e-6);
  test_util::expect_error([&] { s.unscale_(opt); }, "unscale_", "twice");
  s.step(opt);
  EXPECT_FALSE(s.found_inf(opt)) << "a clean step";
  const auto v = w.to_vector<double>();
  EXPECT_NEAR(v[0], -0.6, 1e-5);
  EXPECT_NEAR(v[1], -0.8, 1e-5);
  s.update();
  set_scaled_grad(w, tensor({1.0, 1.0}), s);
  s.unscale_(opt);  // a new step: allowed again
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 1}));
}

// The fused unscale takes float32 and float64 gradients (master weights); a float16 one is refused
// by name, and a step decided on a device never reaches a CPU kernel silently.
TEST(GradScaler, RefusesWhatItsKernelsCannotTake) {
  Tensor w = zeros({2}, {.dtype = DType::Float16}).requires_grad_();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::GradScaler s;
  w.set_grad(ones({2}, {.dtype = DType::Float16}));
  test_util::expect_error([&] { s.unscale_(opt); }, "GradScaler.unscale_",
                          "must be contiguous float32 or float64 on cpu, got float16");
  optim::SgdHyper h;
  h.device = {zeros({}, {.dtype = DType::Float64}), zeros({}, {.dtype = DType::Float64})};
  const Tensor p = zeros({3}), g = ones({3});
  test_util::expect_error([&] { optim::sgd_step_stub(Device::cpu())(p, g, Tensor(), h); }, "SGD.step",
                          "decided on the device (DeviceStep) is for device backends, not the CPU");
}

TEST(GradScaler, DisabledIsAPassThrough) {
  Tensor w = zeros({1}).requires_grad_();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::GradScaler s({.enabled = false});
  Tensor loss = tensor({2.0});
  EXPECT_TRUE(s.scale(loss).is_same(loss));
  w.set_grad(tensor({0.5}));
  s.unscale_(opt);
  s.step(opt);
  EXPECT_FALSE(s.found_inf(opt)) << "a clean step";
  s.update();
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{-0.5}));
}

TEST(GradScaler, RefusesImpossibleStates) {
  optim::GradScaler s;
  test_util::expect_error([&] { s.load_state_dict({.scale = -1}); }, "GradScaler", "scale");
  test_util::expect_error([&] { s.load_state_dict({.scale = NAN}); }, "GradScaler", "scale");
  test_util::expect_error([&] { s.load_state_dict({.growth_factor = 0.5}); }, "GradScaler", "growth_factor");
  test_util::expect_error([&] { s.load_state_dict({.backoff_factor = 1}); }, "GradScaler", "backoff_factor");
  test_util::expect_error([&] { s.load_state_dict({.growth_tracker = 2000}); }, "GradScaler", "growth_tracker");
  test_util::expect_error([] { optim::GradScaler bad({.growth_interval = 0}); }, "GradScaler", "growth_interval");
  EXPECT_EQ(s.get_scale(), 65536.0);
}

namespace {

// A float16 regression run: linear model, loss scaled by `tiny` so its gradients are far below
// float16's smallest value (2^-24), SGD with lr / tiny so the float32 run still learns.
struct Fp16Run {
  nn::Linear model{4, 1};
  optim::SGD opt;
  optim::GradScaler scaler;
  Tensor x, y;
  static constexpr double kTiny = 1.0 / (1 << 28);

  explicit Fp16Run(bool scale, int64_t growth_interval = 2000)
      : opt(model.parameters(), {.lr = 0.1 / kTiny}), scaler({.growth_interval = growth_interval, .enabled = scale}) {
    Generator g(5);
    model.reset_parameters(&g);
    x = randn({16, 4}, {}, &g);
    y = add(matmul(x, tensor({1.0, -2.0, 0.5, 3.0}).view({4, 1})), 0.25);
  }
  // One step in `dt` (Float32: no autocast); returns the unscaled loss.
  double step(DType dt) {
    opt.zero_grad();
    Tensor loss;
    if (dt == DType::Float32) {
      loss = mul(F::mse_loss(model.forward(x), y), kTiny);
    } else {
      autocast ac(Device::cpu(), dt);
      loss = mul(F::mse_loss(model.forward(x), y), kTiny);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    return loss.item() / kTiny;
  }
};

}  // namespace

TEST(GradScaler, Float16UnderflowsWithoutScalingAndTrainsLikeFloat32With) {
  Fp16Run fp32(false), fp16(false), scaled(true);
  const double start = fp32.step(DType::Float32);
  fp16.step(DType::Float16);
  for (const Tensor& p : fp16.model.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().dtype(), DType::Float32);
    for (double v : p.grad().to_vector<double>()) EXPECT_EQ(v, 0.0) << "float16 gradients underflow to zero";
  }
  scaled.step(DType::Float16);
  double l32 = 0, l16 = 0, lscaled = 0;
  for (int i = 0; i < 30; ++i) {
    l32 = fp32.step(DType::Float32);
    l16 = fp16.step(DType::Float16);
    lscaled = scaled.step(DType::Float16);
  }
  EXPECT_LT(l32, 0.05 * start) << "the float32 run learns";
  EXPECT_GT(l16, 0.9 * start) << "without scaling nothing moves";
  EXPECT_NEAR(lscaled, l32, 0.02 * start + 0.05 * l32) << "with scaling it trains like float32";
  const auto w32 = fp32.model.weight.to_vector<double>(), ws = scaled.model.weight.to_vector<double>();
  for (size_t i = 0; i < w32.size(); ++i) EXPECT_NEAR(ws[i], w32[i], 2e-2);
}

// Saved mid-run (after the scale has grown and backed off), a fresh program resumes to the same
// parameters and scale, bit for bit.
TEST(GradScaler, CheckpointResumesExactly) {
  const std::string path = temp_path("resume.ckpt");
  Fp16Run a(true, 3);
  a.scaler.load_state_dict({.scale = 1e30, .growth_interval = 3});  // overflows at first: backs off
  for (int i = 0; i < 5; ++i) a.step(DType::Float16);
  save_training(path, {&a.model, {&a.opt}, {}, {}, &a.scaler, "fp16"}, {.step = 5});
  for (int i = 0; i < 5; ++i) a.step(DType::Float16);

  Fp16Run b(true, 3);
  load_training(path, {&b.model, {&b.opt}, {}, {}, &b.scaler, "fp16"});
  for (int i = 0; i < 5; ++i) b.step(DType::Float16);
  EXPECT_EQ(b.scaler.get_scale(), a.scaler.get_scale());
  EXPECT_EQ(b.scaler.growth_tracker(), a.scaler.growth_tracker());
  EXPECT_LT(a.scaler.get_scale(), 1e30) << "the run backed off";
  EXPECT_EQ(b.model.weight.to_vector<double>(), a.model.weight.to_vector<double>());
  EXPECT_EQ(b.model.bias.to_vector<double>(), a.model.bias.to_vector<double>());
  std::filesystem::remove(path);
}

// Files from before the scaler (none recorded) still load and leave the program's scaler as it
// is; a file with a scaler's state refuses a program without one; a different precision is refused.
TEST(GradScaler, CheckpointCompatibilityAndPrecision) {
  const std::string old_file = temp_path("old.ckpt"), fp16_file = temp_path("fp16.ckpt");
  Fp16Run a(true);
  save_training(old_file, {&a.model, {&a.opt}, {}, {}}, {});
  EXPECT_FALSE(read_checkpoint(old_file).grad_scaler.has_value());
  EXPECT_EQ(read_checkpoint(old_file).precision, "");
  a.scaler.load_state_dict({.scale = 8.0, .growth_tracker = 7});
  load_training(old_file, {&a.model, {&a.opt}, {}, {}, &a.scaler, "fp32"});
  EXPECT_EQ(a.scaler.get_scale(), 8.0);

  save_training(fp16_file, {&a.model, {&a.opt}, {}, {}, &a.scaler, "fp16"}, {});
  EXPECT_EQ(read_checkpoint(fp16_file).precision, "fp16");
  ASSERT_TRUE(read_checkpoint(fp16_file).grad_scaler.has_value());
  EXPECT_EQ(read_checkpoint(fp16_file).grad_scaler->growth_tracker, 7);
  test_util::expect_error(
      [&] {
        load_training(fp16_file, {&a.model, {&a.opt}, {}, {}});
      },
      "checkpoint", "no GradScaler");
  test_util::expect_error(
      [&] {
        load_training(fp16_file, {&a.model, {&a.opt}, {}, {}, &a.scaler, "bf16"});
      },
      "checkpoint", "trained in fp16 but this run's precision is bf16");
  test_util::expect_error(
      [&] {
        load_training(old_file, {&a.model, {&a.opt}, {}, {}, nullptr, "fp16"});
      },
      "checkpoint", "trained in fp32");
  std::filesystem::remove(old_file);
  std::filesystem::remove(fp16_file);
}
