// The bfloat16 GEMM on the tensor cores (core/cuda/gemm_bf16_mma.h: mma.sync m16n8k16, ldmatrix,
// cp.async, through the portable bodies the emulator runs) in every thread order, against float64
// products of the same bfloat16 values: both transposes, tiles and K slices that end early (K
// ending inside a 16-byte chunk, an odd count of elements), a batch with strides, alpha and beta,
// C in bfloat16 and in float32, and the scalar fallback for operands the kernel cannot take.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cuda/emu/emu_device.h"
#include "core/gemm_kernels.h"
#include "core/half_bits.h"
#include "emu/emu_test_util.h"

using namespace ember;

namespace {

struct Shape3 {
  int64_t m, n, k, batch;
};

struct Case {
  bool ta, tb, c_float32;
  double alpha, beta;
  int64_t offset;    // elements A and B start past a 16-byte boundary (1: the scalar fallback)
  bool f16 = false;  // float16 operands (and C) instead of bfloat16
};

// n bfloat16 (float16) values of N(0, 1), as bits.
std::vector<uint16_t> random_bits(int64_t n, bool f16) {
  const std::vector<float> v = randn({n}).to_vector<float>();
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f16 ? float_to_half_bits(v[i]) : float_to_bf16_bits(v[i]);
  return out;
}

Tensor device_bits(const std::vector<uint16_t>& bits, bool f16) {
  std::vector<uint16_t> copy = bits;
  Tensor host =
      from_blob(copy.data(), {static_cast<int64_t>(copy.size())}, f16 ? DType::Float16 : DType::BFloat16, [](void*) {});
  return emu_test::device_copy(host);
}

double value(uint16_t b, bool f16) {
  return static_cast<double>(f16 ? half_bits_to_float(b) : bf16_bits_to_float(b));
}

void check(const Shape3& s, const Case& c) {
  // Leading dimensions: the extent rounded up to a multiple of 8 (the kernel's condition), plus 8
  // elements the kernel must neither read into its product nor write.
  auto ld = [](int64_t extent) { return (extent + 7) / 8 * 8 + 8; };
  const int64_t lda = ld(c.ta ? s.m : s.k), ldb = ld(c.tb ? s.k : s.n), ldc = s.n + 3;
  const int64_t sa = (c.ta ? s.k : s.m) * lda, sb = (c.tb ? s.n : s.k) * ldb, sc = s.m * ldc;
  const std::vector<uint16_t> av = random_bits(s.batch * sa + c.offset, c.f16);
  const std::vector<uint16_t> bv = random_bits(s.batch * sb + c.offset, c.f16);
  const Tensor a = device_bits(av, c.f16), b = device_bits(bv, c.f16);
  const std::vector<uint16_t> c16 = random_bits(s.batch * sc, c.f16);
  auto bf = [&](uint16_t v) { return value(v, c.f16); };
  const std::vector<float> c32 = randn({s.batch * sc}).to_vector<float>();
  Tensor cdev = c.c_float32 ? emu_test::device_copy(from_blob(const_cast<float*>(c32.data()), {s.batch * sc},
                                                              DType::Float32, [](void*) {}))
                            : device_bits(c16, c.f16);
  GemmArgs g;
  g.dtype = c.f16 ? DType::Float16 : DType::BFloat16, g.c_float32 = c.c_float32;
  g.trans_a = c.ta, g.trans_b = c.tb, g.m = s.m, g.n = s.n, g.k = s.k, g.alpha = c.alpha, g.beta = c.beta;
  g.a = static_cast<const uint16_t*>(a.raw_data()) + c.offset, g.lda = lda;
  g.b = static_cast<const uint16_t*>(b.raw_data()) + c.offset, g.ldb = ldb;
  g.c = cdev.raw_data(), g.ldc = ldc;
  emu::kernel(gemm_batched_stub)(g, s.batch, sa, sb, sc);
  const auto* got16 = static_cast<const uint16_t*>(cdev.raw_data());
  const auto* got32 = static_cast<const float*>(cdev.raw_data());
  int bad = 0;
  for (int64_t z = 0; z < s.batch; ++z)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const int64_t o = z * sc + i * ldc + j;
        const double old = c.c_float32 ? c32[o] : bf(c16[o]);
        double want = old, scale = 0;  // the padding columns stay as they were
        if (j < s.n) {
          double sum = 0;
          for (int64_t q = 0; q < s.k; ++q) {
            const double x = bf(av[c.offset + z * sa + (c.ta ? q * lda + i : i * lda + q)]);
            const double y = bf(bv[c.offset + z * sb + (c.tb ? j * ldb + q : q * ldb + j)]);
            sum += x * y, scale += std::abs(x * y);
          }
          want = c.alpha * sum + c.beta * old;
          scale = std::abs(c.alpha) * scale + std::abs(c.beta * old);
        }
        const double got = c.c_float32 ? got32[o] : bf(got16[o]);
        // float32 accumulation, then (16-bit C) one rounding to 8 (11) bits of mantissa.
        const double tol = 1e-5 * scale + (c.c_float32 ? 0.0 : std::abs(want) / (c.f16 ? 2048 : 256));
        if (!(std::abs(got - want) <= tol) && bad++ < 5)  // NaN fails too
          ADD_FAILURE() << "m n k " << s.m << " " << s.n << " " << s.k << " ta " << c.ta << " tb " << c.tb
                        << " c_float32 " << c.c_float32 << " f16 " << c.f16 << " offset " << c.offset << ": C[" << z
                        << "][" << i << "][" << j << "] = " << got << ", want " << want;
      }
  EXPECT_EQ(bad, 0);
}

class GemmBf16Mma : public emu_test::EmulatedKernel {};

}  // namespace

TEST_P(GemmBf16Mma, EveryTransposeAndEdgeMatchesFloat64) {
  const std::vector<Shape3> shapes = {
      {128, 128, 32, 1},  // whole tiles, one K slice
      {130, 136, 72, 1},  // a partial tile in m and n, K slices ending in a partial one
      {7, 20, 9, 2},      // K ending inside a 16-byte chunk with an odd count, a batch
      {1, 1, 1, 1},
  };
  for (int t = 0; t < 4; ++t)
    for (const Shape3& s : shapes) check(s, {(t & 1) != 0, (t & 2) != 0, false, 1.0, 0.0, 0});
  check({40, 24, 16, 1}, {false, true, true, 0.5, 2.0, 0});   // float32 C, beta reads it
  check({40, 24, 16, 1}, {true, false, false, 0.5, 2.0, 0});  // bfloat16 C, beta reads it
  check({40, 24, 16, 1}, {false, false, true, 0.0, 1.0, 0});  // alpha 0: C scaled only
}

TEST_P(GemmBf16Mma, OperandsTheTensorCoreKernelCannotTakeRunTheScalarFallback) {
  for (int t = 0; t < 4; ++t) check({20, 12, 11, 2}, {(t & 1) != 0, (t & 2) != 0, t == 3, 1.5, 0.5, 1});
}

// float16 runs the same kernels with mma.m16n8k16 .f16 fragments and float16 conversions.
TEST_P(GemmBf16Mma, Float16MatchesFloat64Too) {
  for (int t = 0; t < 4; ++t) {
    check({130, 136, 72, 1}, {(t & 1) != 0, (t & 2) != 0, false, 1.0, 0.0, 0, true});
    check({20, 12, 11, 2}, {(t & 1) != 0, (t & 2) != 0, t == 3, 1.5, 0.5, 1, true});  // the fallback
  }
  check({40, 24, 16, 1}, {true, false, false, 0.5, 2.0, 0, true});  // float16 C, beta reads it
}

INSTANTIATE_TEST_SUITE_P(Orders, GemmBf16Mma, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);

TEST(GemmBf16MmaChoice, Float32OperandsAreAnErrorOnCuda) {
  GemmArgs g;
  g.dtype = DType::BFloat16, g.ab_float32 = true;
  g.m = g.n = g.k = 4, g.lda = g.ldb = g.ldc = 4;
  try {
    emu::kernel(gemm_stub)(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ab_float32"), std::string::npos) << e.what();
  }
}

// The op layer reaches it: mm of two bfloat16 tensors on the emulated device against the CPU's
// bfloat16 GEMM on the same tensors (both accumulate in float32 and round once).
TEST(GemmBf16MmaOp, MmOfBfloat16TensorsOnTheDeviceMatchesTheCpu) {
  // Leading dimensions of 40 and 56 elements: the tensor-core kernel (given 16-byte aligned memory).
  const Tensor a = randn({70, 40}).to(DType::BFloat16), b = randn({40, 56}).to(DType::BFloat16);
  const Tensor want = mm(a, b).to(DType::Float32);
  const Tensor got = mm(a.to(emu::device()), b.to(emu::device()));
  ASSERT_EQ(got.dtype(), DType::BFloat16);
  emu_test::expect_close(got.to(Device::cpu()).to(DType::Float32), want, 1.0 / 128, 1e-3, "mm bf16");
}
