// The CUDA random fills and dropout (core/cuda/random.cu) run by the kernel emulator against the
// CPU kernels: the same seed and offset give the same bernoulli mask and integers bit for bit,
// and the same uniform and normal numbers to rounding, for every dtype, including odd sizes (the
// element pairs that share a Philox block) and nonzero offsets; dropout applies the mask and
// scale like the CPU, in all three thread orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/nn_kernels.h"
#include "core/random.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {
class Random : public emu_test::EmulatedKernel {};
}  // namespace

TEST_P(Random, SameSeedGivesTheCpuStream) {
  struct KindCase {
    RandomKind kind;
    double a, b, tol;
  };
  const std::vector<KindCase> kinds = {{RandomKind::Uniform, -2.0, 3.0, 1e-6},
                                       {RandomKind::Normal, 0.5, 2.0, 1e-5},
                                       {RandomKind::Bernoulli, 0.3, 0.0, 0.0},
                                       {RandomKind::RandInt, -5.0, 17.0, 0.0}};
  const std::vector<DType> dts = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                  DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
  for (const KindCase& k : kinds) {
    for (DType dt : dts) {
      if (k.kind == RandomKind::Uniform || k.kind == RandomKind::Normal) {
        if (!is_floating(dt)) continue;
      }
      if (k.kind == RandomKind::RandInt && (dt == DType::UInt8 || dt == DType::Bool)) continue;
      for (int64_t n : {1, 7, 1001}) {
        RandomParams p;
        p.kind = k.kind;
        p.a = k.a;
        p.b = k.b;
        p.seed = 0x1234567890abcdefULL;
        p.offset = 12345;
        Tensor want = empty({n}, {.dtype = dt});
        random_stub(Device::cpu())(want, p, Tensor());
        Tensor got = device_empty({n}, dt);
        emu::kernel(random_stub)(got, p, Tensor());
        const double tol = (dt == DType::Float16 || dt == DType::BFloat16) ? 1e-2 : k.tol;
        expect_close(got, want, tol, tol,
                     std::string(dtype_name(dt)) + " kind " + std::to_string(static_cast<int>(k.kind)) + " n " +
                         std::to_string(n));
      }
    }
  }
}

TEST_P(Random, BernoulliWithAProbabilityTensorAndDropoutMatchTheCpu) {
  const int64_t n = 777;
  Tensor prob = rand({n}, {.dtype = DType::Float64});
  RandomParams p;
  p.kind = RandomKind::Bernoulli;
  p.seed = 42;
  p.offset = 3;
  Tensor mask = empty({n}, {.dtype = DType::UInt8});
  random_stub(Device::cpu())(mask, p, prob);
  Tensor dmask = device_empty({n}, DType::UInt8);
  emu::kernel(random_stub)(dmask, p, device_copy(prob));
  expect_close(dmask, mask, 0, 0, "bernoulli mask");
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = randn({n}, {.dtype = dt});
    Tensor want = empty({n}, {.dtype = dt});
    dropout_apply_stub(Device::cpu())(want, x, mask, 1.0 / 0.7);
    Tensor got = device_empty({n}, dt);
    emu::kernel(dropout_apply_stub)(got, device_copy(x), dmask, 1.0 / 0.7);
    expect_close(got, want, 1e-6, 0, std::string("dropout ") + dtype_name(dt));
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Random, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
