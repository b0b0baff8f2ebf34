// The CUDA SGEMM/DGEMM (core/cuda/gemm.cu) run by the kernel emulator against the CPU (OpenBLAS)
// kernels: every transpose pair, float and double, sizes that are not multiples of any tile
// (and ones spanning several tiles in each direction), padded leading dimensions, alpha/beta
// (beta 0 ignoring NaNs in C, alpha 0 ignoring NaNs in A and B), k = 0, batched with strides
// and with a broadcast (stride 0) operand, and the dot product, in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda/mma.h"
#include "core/gemm_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::expect_close;
using test_util::expect_error;

namespace {

class Gemm : public emu_test::EmulatedKernel {};

struct Case {
  int64_t m, n, k;
  int64_t pad;  // extra columns in every leading dimension
  double alpha, beta;
};

double tol(DType dt) {
  return dt == DType::Float32 ? 1e-4 : 1e-11;
}

// Runs one (batched) case on the CPU and the emulated kernel with the same operands.
void check(DType dt, bool ta, bool tb, const Case& c, int64_t batch, bool broadcast_b) {
  const std::string what = std::string(dtype_name(dt)) + (ta ? " At" : " A") + (tb ? " Bt" : " B") + " m" +
                           std::to_string(c.m) + " n" + std::to_string(c.n) + " k" + std::to_string(c.k) + " pad" +
                           std::to_string(c.pad) + " batch" + std::to_string(batch) + (broadcast_b ? " bcastB" : "");
  // Stored shapes: A is [m, k] or [k, m], B is [k, n] or [n, k], C [m, n], each with `pad` extra columns.
  const int64_t ar = ta ? c.k : c.m, ac = (ta ? c.m : c.k) + c.pad;
  const int64_t br = tb ? c.n : c.k, bc = (tb ? c.k : c.n) + c.pad;
  const int64_t cr = c.m, cc = c.n + c.pad;
  Tensor a = randn({batch, ar, ac}, {.dtype = dt});
  Tensor b = randn({broadcast_b ? 1 : batch, br, bc}, {.dtype = dt});
  Tensor c0 = randn({batch, cr, cc}, {.dtype = dt});
  if (c.beta == 0.0) c0.fill_(std::numeric_limits<double>::quiet_NaN());
  Tensor want = c0.clone(), ad = device_copy(a), bd = device_copy(b), got = device_copy(c0);
  auto args = [&](const Tensor& A, const Tensor& B, const Tensor& C) {
    GemmArgs g;
    g.dtype = dt, g.trans_a = ta, g.trans_b = tb, g.m = c.m, g.n = c.n, g.k = c.k, g.alpha = c.alpha, g.beta = c.beta;
    g.a = A.raw_data(), g.lda = std::max<int64_t>(ac, 1);
    g.b = B.raw_data(), g.ldb = std::max<int64_t>(bc, 1);
    g.c = C.raw_data(), g.ldc = std::max<int64_t>(cc, 1);
    return g;
  };
  const int64_t sa = ar * ac, sb = broadcast_b ? 0 : br * bc, sc = cr * cc;
  if (batch == 1) {
    gemm_stub(Device::cpu())(args(a, b, want));
    emu::kernel(gemm_stub)(args(ad, bd, got));
  } else {
    gemm_batched_stub(Device::cpu())(args(a, b, want), batch, sa, sb, sc);
    emu::kernel(gemm_batched_stub)(args(ad, bd, got), batch, sa, sb, sc);
  }
  // The padding columns of C must be untouched (compared as part of the whole buffer).
  expect_close(got, want, tol(dt), tol(dt) * std::max<double>(1.0, std::sqrt(static_cast<double>(c.k))), what);
}

}  // namespace

TEST_P(Gemm, EveryTransposeMatchesTheCpu) {
  const std::vector<Case> cases = {
      {37, 45, 29, 0, 1.0, 0.0},  // inside one tile, k not a multiple of the slice
      {1, 1, 1, 0, 1.0, 0.0},     // a single element
      {70, 3, 19, 3, 0.5, -1.5},  // padded leading dimensions, alpha and beta
      {5, 67, 8, 1, 2.0, 1.0},    // exactly one k slice
      {9, 11, 0, 0, 1.0, 0.5},    // k = 0: C = beta C
  };
  for (DType dt : {DType::Float32, DType::Float64})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const Case& c : cases) check(dt, ta, tb, c, 1, false);
}

// Several tiles in both directions (float: 128 x 128, double: 64 x 64) with ragged edges, and
// enough k slices to cycle both shared-memory stages.
TEST_P(Gemm, SeveralTilesMatchTheCpu) {
  check(DType::Float32, false, false, {131, 133, 41, 0, 1.0, 0.0}, 1, false);
  check(DType::Float32, true, true, {130, 129, 17, 2, 1.0, 1.0}, 1, false);
  check(DType::Float64, false, true, {67, 129, 33, 1, 1.0, 0.0}, 1, false);
  check(DType::Float64, true, false, {130, 65, 25, 0, -1.0, 2.0}, 1, false);
}

// More row tiles than column tiles: the row tiles go on grid x and the column tiles on grid y
// (core/cuda/gemm_geometry.h), the mapping that lets M exceed 65535 tiles on a GPU. Every
// transpose, both dtypes, ragged edges in both directions, and batched.
TEST_P(Gemm, TallOutputsPutRowTilesOnGridX) {
  for (DType dt : {DType::Float32, DType::Float64})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check(dt, ta, tb, {300, 70, 19, 1, 1.0, 0.0}, 1, false);
  check(DType::Float32, false, false, {260, 129, 9, 0, 1.0, 0.5}, 1, false);  // 3 x 2 tiles
  check(DType::Float64, true, false, {200, 130, 9, 0, 1.0, 0.0}, 1, false);   // 4 x 3 tiles
  check(DType::Float32, false, true, {140, 20, 9, 0, 1.0, 0.0}, 2, false);
}

TEST_P(Gemm, BatchedMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    check(dt, false, false, {13, 17, 11, 0, 1.0, 0.0}, 3, false);
    check(dt, true, false, {13, 17, 11, 1, 1.0, 1.0}, 3, true);  // B broadcast over the batch
    check(dt, false, true, {6, 9, 21, 0, 0.5, 0.0}, 2, false);
  }
}

// alpha 0 reads neither A nor B (their NaNs do not reach C); beta 0 ignores C's NaNs (tested in
// every case above with beta 0: C starts as NaN).
TEST_P(Gemm, AlphaZeroIgnoresTheOperands) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor a = full({4, 5}, std::numeric_limits<double>::quiet_NaN(), {.dtype = dt});
    Tensor b = full({5, 3}, std::numeric_limits<double>::quiet_NaN(), {.dtype = dt});
    Tensor c = randn({4, 3}, {.dtype = dt});
    Tensor want = c.clone(), got = device_copy(c);
    want.mul_(2.0);
    GemmArgs g;
    g.dtype = dt, g.m = 4, g.n = 3, g.k = 5, g.alpha = 0.0, g.beta = 2.0;
    g.a = a.raw_data(), g.lda = 5, g.b = b.raw_data(), g.ldb = 3, g.c = got.raw_data(), g.ldc = 3;
    emu::kernel(gemm_stub)(g);
    expect_close(got, want, tol(dt), tol(dt), std::string(dtype_name(dt)) + " alpha 0");
  }
}

TEST_P(Gemm, DotMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    // 20000 and 70001: the two-stage dot (several blocks of 8192, then their partials in order).
    for (int64_t n : {0, 1, 37, 300, 20000, 70001}) {
      Tensor x = randn({std::max<int64_t>(2 * n, 1)}, {.dtype = dt}),
             y = randn({std::max<int64_t>(n, 1)}, {.dtype = dt});
      Tensor want = zeros({1}, {.dtype = dt}), got = device_copy(zeros({1}, {.dtype = dt}));
      dot_stub(Device::cpu())(dt, n, x.raw_data(), 2, y.raw_data(), 1, want.raw_data());
      emu::kernel(dot_stub)(dt, n, device_copy(x).raw_data(), 2, device_copy(y).raw_data(), 1, got.raw_data());
      expect_close(got, want, tol(dt), tol(dt), std::string(dtype_name(dt)) + " dot n=" + std::to_string(n));
    }
  }
}

TEST(GemmErrors, BadArgumentsAreErrors) {
  Tensor t = device_copy(zeros({4}));
  GemmArgs g;
  g.dtype = DType::Int32, g.m = 1, g.n = 1, g.k = 1, g.a = g.b = g.c = t.raw_data();
  expect_error([&] { emu::kernel(gemm_stub)(g); }, "gemm", "float32 or float64");
  g.dtype = DType::Float32, g.m = int64_t{1} << 32;
  expect_error([&] { emu::kernel(gemm_stub)(g); }, "gemm", "2^31");
  g.m = 1;
  expect_error([&] { emu::kernel(gemm_batched_stub)(g, 2, -1, 0, 1); }, "gemm", "non-negative strides");
  expect_error([&] { emu::kernel(dot_stub)(DType::Int64, 1, t.raw_data(), 1, t.raw_data(), 1, t.raw_data()); }, "dot",
               "float32 or float64");
}

namespace {

// Sets EMBER_GEMM_TF32 for one scope.
struct ScopedTf32 {
  ScopedTf32() { setenv("EMBER_GEMM_TF32", "1", 1); }
  ~ScopedTf32() { unsetenv("EMBER_GEMM_TF32"); }
};

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

// With EMBER_GEMM_TF32=1 float GEMMs run on the mma kernel: compared with a float64 CPU GEMM of
// the tf32-rounded operands (the only rounding left is the float accumulation), every transpose,
// ragged edges, two row and column tiles, alpha/beta, and a batch.
TEST_P(Gemm, Tf32TensorCoreKernelMatchesTheRoundedProduct) {
  ScopedTf32 tf32;
  struct T32 {
    bool ta, tb;
    Case c;
    int64_t batch;
  };
  const std::vector<T32> cases = {
      {false, false, {37, 21, 13, 0, 1.0, 0.0}, 1}, {true, false, {19, 70, 9, 1, 0.5, -1.0}, 1},
      {false, true, {70, 11, 17, 2, 1.0, 1.0}, 1},  {true, true, {23, 29, 8, 0, 1.0, 0.0}, 1},
      {false, false, {9, 14, 11, 0, 1.0, 0.0}, 2},
  };
  for (const T32& t : cases) {
    const Case& c = t.c;
    const int64_t ar = t.ta ? c.k : c.m, ac = (t.ta ? c.m : c.k) + c.pad;
    const int64_t br = t.tb ? c.n : c.k, bc = (t.tb ? c.k : c.n) + c.pad, cc = c.n + c.pad;
    auto rounded = [](Shape s) {
      std::vector<float> v = randn(s).to_vector<float>();
      for (float& x : v) x = round_tf32(x);
      return from_vector(v, s);
    };
    Tensor a = rounded({t.batch, ar, ac}), b = rounded({t.batch, br, bc});
    Tensor c0 = randn({t.batch, c.m, cc});
    if (c.beta == 0.0) c0.fill_(std::numeric_limits<double>::quiet_NaN());
    Tensor a64 = a.to(DType::Float64), b64 = b.to(DType::Float64), want = c0.to(DType::Float64);
    Tensor got = device_copy(c0), ad = device_copy(a), bd = device_copy(b);
    GemmArgs g;
    g.trans_a = t.ta, g.trans_b = t.tb, g.m = c.m, g.n = c.n, g.k = c.k, g.alpha = c.alpha, g.beta = c.beta;
    g.lda = ac, g.ldb = bc, g.ldc = cc;
    GemmArgs g64 = g, g32 = g;
    g64.dtype = DType::Float64, g64.a = a64.raw_data(), g64.b = b64.raw_data(), g64.c = want.raw_data();
    g32.dtype = DType::Float32, g32.a = ad.raw_data(), g32.b = bd.raw_data(), g32.c = got.raw_data();
    gemm_batched_stub(Device::cpu())(g64, t.batch, ar * ac, br * bc, c.m * cc);
    emu::kernel(gemm_batched_stub)(g32, t.batch, ar * ac, br * bc, c.m * cc);
    expect_close(got, want.to(DType::Float32), 1e-5, 1e-5 * std::sqrt(static_cast<double>(c.k)),
                 std::string("tf32") + (t.ta ? " At" : " A") + (t.tb ? " Bt" : " B") + " m" + std::to_string(c.m) +
                     " n" + std::to_string(c.n) + " k" + std::to_string(c.k));
  }
}

// The switch really changes kernels: 1 + 2^-12 survives a float GEMM and rounds to 1 in tf32.
TEST_P(Gemm, Tf32SwitchSelectsTheTensorCoreKernel) {
  const float x = 1.0f + std::ldexp(1.0f, -12);
  auto product = [&] {
    Tensor a = device_copy(full({1, 1}, x)), b = device_copy(full({1, 1}, 1.0)), c = device_copy(zeros({1, 1}));
    GemmArgs g;
    g.m = g.n = g.k = 1, g.a = a.raw_data(), g.b = b.raw_data(), g.c = c.raw_data();
    emu::kernel(gemm_stub)(g);
    return c.to_vector<float>()[0];
  };
  EXPECT_EQ(product(), x);
  ScopedTf32 tf32;
  EXPECT_EQ(product(), 1.0f);
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Gemm, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
