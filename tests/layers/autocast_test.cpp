// ember::autocast beyond the table (autocast_table_test.cpp): float32 master weights and their
// float32 gradients, the per-step cache of a parameter's 16-bit copy and its invalidation, nesting
// and turning autocast off, other device types, float64 untouched (gradient checks included),
// backward inside a scope, and the dtype check.
#include "core/ops/autocast.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/cpu_capability.h"
#include "core/ops.h"
#include "layers/conv.h"
#include "layers/functional.h"
#include "layers/linear.h"
#include "layers/optim/sgd.h"
#include "test_helpers.h"

using namespace ember;
namespace F = ember::nn::functional;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (double v : a.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace

// A conv + linear classifier: the forward under autocast, the loss in float32, and the gradients
// reach the float32 parameters in float32, close to the float32 run's.
TEST(Autocast, MasterWeightsStayFloat32AndGetFloat32Gradients) {
  manual_seed(3);
  nn::Conv2d conv(2, 4, 3, {.padding = 1});
  nn::Linear fc(4 * 6 * 6, 5);
  Tensor x = randn({3, 2, 6, 6}), y = tensor({0, 3, 4}, {.dtype = DType::Int64});
  auto loss_of = [&] { return cross_entropy(fc.forward(relu(conv.forward(x)).flatten(1)), y); };

  Tensor ref = loss_of();
  ref.backward();
  const Tensor gw32 = conv.weight.grad().clone(), gfc32 = fc.weight.grad().clone();
  conv.weight.set_grad(Tensor());
  fc.weight.set_grad(Tensor());

  for (DType dt : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor loss;
    {
      autocast ac(Device::cpu(), dt);
      loss = loss_of();
    }
    EXPECT_EQ(loss.dtype(), DType::Float32);
    EXPECT_NEAR(loss.item(), ref.item(), dt == DType::BFloat16 ? 2e-2 : 3e-3);
    loss.backward();
    for (const Tensor* p : {&conv.weight, &conv.bias, &fc.weight, &fc.bias}) {
      EXPECT_EQ(p->dtype(), DType::Float32);
      ASSERT_TRUE(p->grad().defined());
      EXPECT_EQ(p->grad().dtype(), DType::Float32);
    }
    const double tol = dt == DType::BFloat16 ? 3e-2 : 5e-3;
    EXPECT_LT(max_abs_diff(conv.weight.grad(), gw32), tol * (1 + max_abs(gw32)));
    EXPECT_LT(max_abs_diff(fc.weight.grad(), gfc32), tol * (1 + max_abs(gfc32)));
    conv.weight.set_grad(Tensor());
    fc.weight.set_grad(Tensor());
    conv.bias.set_grad(Tensor());
    fc.bias.set_grad(Tensor());
  }
}

// A transposed convolution with a bias (DCGAN's layers) trains under autocast: its bias gradient,
// a sum of the 16-bit output gradient, reaches the float32 bias in float32, close to float32's.
TEST(Autocast, ConvTransposeBiasGetsItsGradient) {
  manual_seed(5);
  Tensor x = randn({2, 4, 5, 5}), w = randn({4, 3, 3, 3}).requires_grad_(), b = randn({3}).requires_grad_();
  Tensor r = randn({2, 3, 11, 11});
  auto loss_of = [&] { return sum(mul(conv_transpose2d(x, w, b, {.stride = {2, 2}}), r)); };
  loss_of().backward();
  const Tensor gb32 = b.grad().clone();
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(dt));
    b.set_grad(Tensor());
    Tensor loss;
    {
      autocast ac(Device::cpu(), dt);
      loss = loss_of();
    }
    loss.backward();
    ASSERT_TRUE(b.grad().defined());
    EXPECT_EQ(b.grad().dtype(), DType::Float32);
    EXPECT_LT(max_abs_diff(b.grad(), gb32), 2e-2 * (1 + max_abs(gb32)));
  }
}

// One 16-bit copy of a parameter per scope, shared by every op that reads it (their gradients
// summed into the one parameter); a changed parameter (an optimizer step) is cast afresh; leaving
// the outermost scope empties the cache.
TEST(Autocast, ParameterCastsAreCachedPerStepAndInvalidatedByChange) {
  Tensor w = randn({4, 4}).requires_grad_();
  Tensor x = randn({2, 4});
  optim::SGD opt({w}, {.lr = 0.5});
  {
    autocast ac(Device::cpu());
    Tensor a = F::linear(x, w), b = F::linear(x, w);
    EXPECT_EQ(autocast_cached_casts(), 1u);
    EXPECT_EQ(a.dtype(), DType::BFloat16);
    Tensor loss = sum(add(a, b));
    {
      detail::AutocastSuspend off;  // backward as a training step would run it
      loss.backward();
    }
    EXPECT_EQ(w.grad().dtype(), DType::Float32);
    const Tensor before = F::linear(x, w).to(DType::Float32);
    opt.step();  // changes w in place: its cached copy is stale
    const Tensor after = F::linear(x, w).to(DType::Float32);
    EXPECT_EQ(autocast_cached_casts(), 1u) << "the stale copy was replaced, not kept beside";
    EXPECT_GT(max_abs_diff(before, after), 1e-3) << "the step's change reached the cast";
    NoGradGuard ng;
    const Tensor want = F::linear(x.to(DType::BFloat16).to(DType::Float32), w.to(DType::BFloat16).to(DType::Float32));
    EXPECT_LT(max_abs_diff(after, want), 5e-2);
  }
  EXPECT_EQ(autocast_cached_casts(), 0u);
}

TEST(Autocast, NestsAndTurnsOffAndRestores) {
  Tensor a = randn({3, 3}), b = randn({3, 3});
  EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
  {
    autocast outer(Device::cpu(), DType::Float16);
    EXPECT_EQ(mm(a, b).dtype(), DType::Float16);
    {
      autocast off(Device::cpu(), DType::BFloat16, false);
      EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
      EXPECT_EQ(mm(a, b).dtype(), DType::Float32);
      {
        autocast inner(Device::cpu(), DType::BFloat16);
        EXPECT_EQ(mm(a, b).dtype(), DType::BFloat16);
      }
      EXPECT_EQ(mm(a, b).dtype(), DType::Float32);
    }
    EXPECT_TRUE(autocast_enabled(DeviceType::CPU));
    EXPECT_EQ(autocast_dtype(DeviceType::CPU), DType::Float16);
    EXPECT_EQ(mm(a, b).dtype(), DType::Float16);
  }
  EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
  EXPECT_EQ(mm(a, b).dtype(), DType::Float32);
}

// Autocast is per device type: a scope for CUDA leaves CPU tensors alone (no GPU needed).
TEST(Autocast, OtherDeviceTypesAreLeftAlone) {
  autocast ac(Device(DeviceType::CUDA), DType::Float16);
  EXPECT_TRUE(autocast_enabled(DeviceType::CUDA));
  EXPECT_EQ(mm(randn({2, 2}), randn({2, 2})).dtype(), DType::Float32);
  EXPECT_EQ(softmax(randn({2, 2}).to(DType::BFloat16).to(DType::Float32), 0).dtype(), DType::Float32);
}

// float64 is never cast: a double-precision gradient check inside a scope passes.
TEST(Autocast, Float64GradientChecksAreUnaffected) {
  autocast ac(Device::cpu());
  const TensorOptions f64{.dtype = DType::Float64};
  Tensor x = randn({2, 2, 5, 5}, f64).requires_grad_(), w = randn({3, 2, 3, 3}, f64).requires_grad_();
  Tensor lw = randn({4, 3 * 3 * 3}, f64).requires_grad_();
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor h = relu(conv2d(in[0], in[1]));
    return log_softmax(F::linear(h.flatten(1), in[2]), -1);
  };
  EXPECT_EQ(fn({x, w, lw}).dtype(), DType::Float64);
  auto r = gradcheck(fn, {x, w, lw});
  EXPECT_TRUE(r.ok) << r.message;
}

// backward() called inside the scope gives the gradients it gives outside: the engine turns
// autocast off, so a backward function's sum or softmax does not recast a 16-bit gradient.
TEST(Autocast, BackwardInsideAScopeMatchesOutside) {
  Tensor w = randn({5, 4}).requires_grad_(), b = randn({5}).requires_grad_();
  Tensor x = randn({3, 4});
  Tensor g_out, g_in;
  bool on_during_backward = true;
  {
    autocast ac(Device::cpu());
    Tensor y = F::linear(x, w, b);
    y.register_hook([&](const Tensor&) {
      on_during_backward = autocast_enabled(DeviceType::CPU);
      return Tensor();
    });
    Tensor loss = F::mse_loss(y, zeros({3, 5}));
    loss.backward();
    EXPECT_TRUE(autocast_enabled(DeviceType::CPU)) << "restored after backward";
    g_in = w.grad().clone();
  }
  EXPECT_FALSE(on_during_backward);
  w.set_grad(Tensor());
  Tensor loss;
  {
    autocast ac(Device::cpu());
    loss = F::mse_loss(F::linear(x, w, b), zeros({3, 5}));
  }
  loss.backward();
  g_out = w.grad();
  EXPECT_EQ(g_in.dtype(), DType::Float32);
  EXPECT_EQ(max_abs_diff(g_in, g_out), 0.0);
}

TEST(Autocast, RefusesAFullPrecisionDtype) {
  test_util::expect_error([] { autocast ac(Device::cpu(), DType::Float32); }, "autocast", "bfloat16 or float16");
  EXPECT_FALSE(autocast_enabled(DeviceType::CPU));
}

// The note that bfloat16 gains nothing follows the level the kernels run at, not the CPU's flags:
// a CPU with AVX512-BF16 forced down to avx512 runs the float32 fallback.
TEST(Autocast, Bf16IsNativeOnlyAtTheAvx512Bf16Level) {
  const CpuCapability before = cpu_capability();
  for (CpuCapability level : cpu_capabilities_available()) {
    if (level == CpuCapability::Native) continue;
    set_cpu_capability(level);
    EXPECT_EQ(autocast_bf16_is_native(), level == CpuCapability::Avx512Bf16) << cpu_capability_name(level);
  }
  set_cpu_capability(before);
}
