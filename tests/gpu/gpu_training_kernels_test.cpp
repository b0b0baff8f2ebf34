// The GPU label, continued: what a training step runs besides the op table. The tensor-core
// (TF32 mma) GEMM against float32 within TF32's rounding, and shown to be a different path; every
// optimizer's fused step and both gradient clippings on cuda:0 against the CPU. Part of
// ember_gpu_tests (its main is in gpu_ops_test.cpp); every test skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/kernel_choice.h"
#include "core/ops.h"
#include "layers/optim/adagrad.h"
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#include "layers/optim/rmsprop.h"
#include "layers/optim/sgd.h"

using namespace ember;

namespace {

const Device kGpu = Device::cuda(0);

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"

std::vector<float> host(const Tensor& t) {
  return t.to(Device::cpu()).to_vector<float>();
}

// EMBER_GEMM_TF32=1 for the scope (gemm.cu reads it on every call).
struct Tf32On {
  Tf32On() { ::setenv("EMBER_GEMM_TF32", "1", 1); }
  ~Tf32On() { ::unsetenv("EMBER_GEMM_TF32"); }
};

TEST(GpuTf32, TensorCoreGemmMatchesFloat32WithinTf32Rounding) {
  SKIP_WITHOUT_GPU();
  Generator g(7);
  const int64_t M = 200, K = 300, N = 136;  // not multiples of the 64 x 64 x 8 tiles
  Tensor a = randn({M, K}, {}, &g), b = randn({K, N}, {}, &g);
  const std::vector<float> want = host(matmul(a, b));
  const std::vector<float> scale = host(matmul(abs(a), abs(b)));  // sum of |a_ik b_kj|
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Native);
  const std::vector<float> fp32 = host(matmul(a.to(kGpu), b.to(kGpu)));
  std::vector<float> tf32;
  {
    Tf32On on;
    tf32 = host(matmul(a.to(kGpu), b.to(kGpu)));
  }
  set_kernel_choice(KernelFamily::Gemm, KernelChoice::Auto);
  size_t differs = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    // Each product of two tf32 roundings (2^-11 relative each) is within about 2^-10 of the exact
    // one; the float accumulation adds far less.
    ASSERT_LE(std::fabs(tf32[i] - want[i]), 2.0 * std::ldexp(1.0, -10) * scale[i] + 1e-5) << "element " << i;
    ASSERT_LE(std::fabs(fp32[i] - want[i]), 1e-4 * scale[i] + 1e-5) << "element " << i;
    differs += tf32[i] != fp32[i];
  }
  // Dropping 13 mantissa bits changes most results: equal everywhere would mean the float32
  // kernel ran both times.
  EXPECT_GT(differs, want.size() / 2) << "the TF32 path did not run";
}

struct OptimCase {
  std::string name;
  std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> make;
};

std::vector<OptimCase> optimizers() {
  using namespace optim;
  return {
      {"sgd_nesterov",
       [](auto p) {
         return std::make_unique<SGD>(p,
                                      SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-2, .nesterov = true});
       }},
      {"adam_amsgrad",
       [](auto p) {
         return std::make_unique<Adam>(p, AdamOptions{.lr = 1e-2, .weight_decay = 1e-2, .amsgrad = true});
       }},
      {"adamw", [](auto p) { return std::make_unique<AdamW>(p, AdamWOptions{.lr = 1e-2}); }},
      {"rmsprop_centered",
       [](auto p) { return std::make_unique<RMSprop>(p, RMSpropOptions{.momentum = 0.5, .centered = true}); }},
      {"adagrad", [](auto p) { return std::make_unique<Adagrad>(p, AdagradOptions{.lr_decay = 1e-3}); }},
  };
}

TEST(GpuOptim, EveryOptimizerStepMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (const OptimCase& c : optimizers()) {
    SCOPED_TRACE(c.name);
    Generator g(11);
    // Sizes around the kernels' vector widths and block sizes, and a 0-d parameter.
    std::vector<Tensor> cpu = {randn({1000}, {}, &g), randn({33, 7}, {}, &g), randn({}, {}, &g)};
    std::vector<Tensor> gpu;
    for (const Tensor& p : cpu) gpu.push_back(p.to(kGpu));
    auto oc = c.make(cpu), og = c.make(gpu);
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < cpu.size(); ++i) {
        Tensor grad = randn(cpu[i].shape(), {}, &g);
        cpu[i].set_grad(grad);
        gpu[i].set_grad(grad.to(kGpu));
      }
      oc->step();
      og->step();
    }
    for (size_t i = 0; i < cpu.size(); ++i) {
      std::vector<float> want = host(cpu[i]), got = host(gpu[i]);
      for (size_t j = 0; j < want.size(); ++j)
        ASSERT_NEAR(got[j], want[j], 1e-5 * (1 + std::fabs(want[j]))) << "parameter " << i << " element " << j;
    }
  }
}

TEST(GpuClip, NormAndValueClippingMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  for (double norm_type : {2.0, 1.0, double(INFINITY)}) {
    SCOPED_TRACE(norm_type);
    Generator g(5);
    std::vector<Tensor> cpu = {randn({513}, {}, &g), randn({4, 129}, {}, &g)};
    std::vector<Tensor> gpu;
    for (Tensor& p : cpu) {
      p.set_grad(randn(p.shape(), {}, &g) * 3.0);
      Tensor q = p.to(kGpu);
      q.set_grad(p.grad().to(kGpu));
      gpu.push_back(q);
    }
    const double want = optim::clip_grad_norm_(cpu, 1.5, norm_type);
    const double got = optim::clip_grad_norm_(gpu, 1.5, norm_type);
    EXPECT_NEAR(got, want, 1e-5 * want);
    optim::clip_grad_value_(cpu, 0.05);
    optim::clip_grad_value_(gpu, 0.05);
    for (size_t i = 0; i < cpu.size(); ++i) {
      std::vector<float> w = host(cpu[i].grad()), h = host(gpu[i].grad());
      for (size_t j = 0; j < w.size(); ++j) ASSERT_NEAR(h[j], w[j], 1e-6) << "gradient " << i << " element " << j;
    }
  }
}

}  // namespace
