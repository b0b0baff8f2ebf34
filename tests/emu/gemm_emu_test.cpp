// What the op table cannot say about the CUDA GEMM (core/cuda/gemm.cu) and stays here: which
// kernel EMBER_GEMM_TF32 selects (a row sees values, and tf32-exact operands give the same values
// on either kernel), and the tf32 rounding itself (a host function, pinned on hand values). The
// GEMM's results, tensor-core kernel included, are the op table's (tests/ops/op_rows_gemm.cpp);
// its argument errors are in kernel_errors_emu_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/cuda/mma.h"
#include "core/gemm_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;

namespace {

float round_tf32(float x) {
  return ember::cuda::to_tf32(x);
}

}  // namespace

// The rounding the tf32 kernel applies to its inputs: to nearest with ties away from zero, 10
// mantissa bits; infinities and NaN unchanged.
TEST(Tf32, RoundsToTenMantissaBitsTiesAway) {
  EXPECT_EQ(round_tf32(1.0f), 1.0f);
  EXPECT_EQ(round_tf32(1.0f + std::ldexp(1.0f, -12)), 1.0f);                          // below half an ulp
  EXPECT_EQ(round_tf32(1.0f + std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -10));  // a tie: away from zero
  EXPECT_EQ(round_tf32(-1.0f - std::ldexp(1.0f, -11)), -1.0f - std::ldexp(1.0f, -10));
  EXPECT_EQ(round_tf32(1.0f + 3 * std::ldexp(1.0f, -12)), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(round_tf32(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(round_tf32(std::numeric_limits<float>::quiet_NaN())));
}

// The switch really changes kernels: 1 + 2^-12 survives a float GEMM and rounds to 1 in tf32.
TEST(Tf32, SwitchSelectsTheTensorCoreKernel) {
  const float x = 1.0f + std::ldexp(1.0f, -12);
  auto product = [&] {
    Tensor a = device_copy(full({1, 1}, x)), b = device_copy(full({1, 1}, 1.0)), c = device_copy(zeros({1, 1}));
    GemmArgs g;
    g.m = g.n = g.k = 1, g.a = a.raw_data(), g.b = b.raw_data(), g.c = c.raw_data();
    emu::kernel(gemm_stub)(g);
    return c.to_vector<float>()[0];
  };
  EXPECT_EQ(product(), x);
  const test_util::ScopedEnv tf32("EMBER_GEMM_TF32", "1");
  EXPECT_EQ(product(), 1.0f);
}
