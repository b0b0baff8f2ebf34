// The CUDA dtype-converting copy (core/cuda/cast.cu) run by the kernel emulator against the CPU
// copy: every (to, from) pair of the eight dtypes, contiguous and strided, and float16/bfloat16
// rounding at their edges (subnormals, overflow to infinity, NaN, ties), bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/cuda/cast.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class Cast : public emu_test::EmulatedKernel {};

const std::vector<DType> kAll = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                 DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};

// Values every dtype can hold (so that the conversion, not overflow, is tested).
Tensor sample(Shape shape, DType dt) {
  Tensor v = randint(0, 120, shape, {.dtype = DType::Float64}) * 0.5;
  if (dt == DType::Bool) v = randint(0, 2, shape, {.dtype = DType::Float64});
  return v.to(dt);
}

}  // namespace

TEST_P(Cast, EveryPairMatchesTheCpuCopy) {
  for (DType from : kAll) {
    for (DType to : kAll) {
      for (bool transposed : {false, true}) {
        Tensor src = sample({23, 11}, from);
        Tensor src_dev = device_copy(src);
        if (transposed) {
          src = src.t();
          src_dev = src_dev.t();
        }
        Tensor want = empty(src.shape(), {.dtype = to});
        want.copy_(src);
        Tensor got = device_empty(src.shape(), to);
        cuda::cast_copy(got, src_dev);
        expect_close(got, want, 0.0, 0.0,
                     std::string(dtype_name(from)) + " -> " + dtype_name(to) + (transposed ? " (strided)" : ""));
      }
    }
  }
}

// Out-of-range floats, infinities and NaN to integers: the kernel saturates like the CPU's copy
// (core/float_to_int.h, shared by both).
TEST_P(Cast, OutOfRangeFloatsSaturateLikeTheCpu) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor src64 = from_vector(
      std::vector<double>{-3.7, 300.0, -1e30, 1e30, inf, -inf, nan, 3e9, -3e9, 9.3e18, -9.3e18, 255.5, -0.5}, {13});
  for (DType from : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (DType to : {DType::UInt8, DType::Int32, DType::Int64}) {
      Tensor src = src64.to(from);
      Tensor want = empty(src.shape(), {.dtype = to});
      want.copy_(src);
      Tensor got = device_empty(src.shape(), to);
      cuda::cast_copy(got, device_copy(src));
      expect_close(got, want, 0.0, 0.0, std::string(dtype_name(from)) + " -> " + dtype_name(to));
    }
  }
}

TEST_P(Cast, HalfAndBFloat16RoundLikeTheCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> edge = {0.0f,          -0.0f,          1.0f,     65504.0f, 65520.0f, 70000.0f, 1e-5f,
                             6e-8f,         3e-8f,          1e-9f,    -2.5f,    inf,      -inf,     NAN,
                             1.0009765625f, 1.00048828125f, 3.14159f, 1e38f,    -1e-40f,  2049.0f,  2051.0f};
  for (int i = 0; i < 200; ++i) edge.push_back(std::ldexp(1.0f + static_cast<float>(i) / 200.0f, i % 40 - 20));
  Tensor src = from_blob(edge.data(), {static_cast<int64_t>(edge.size())}, DType::Float32).clone();
  for (DType to : {DType::Float16, DType::BFloat16}) {
    Tensor want = empty(src.shape(), {.dtype = to});
    want.copy_(src);
    Tensor got = device_empty(src.shape(), to);
    cuda::cast_copy(got, device_copy(src));
    // Bit for bit: compare the raw 16-bit patterns.
    const uint16_t* g = static_cast<const uint16_t*>(got.raw_data());
    const uint16_t* w = static_cast<const uint16_t*>(want.raw_data());
    for (size_t i = 0; i < edge.size(); ++i) EXPECT_EQ(g[i], w[i]) << dtype_name(to) << " of " << edge[i];
    // And back to float32.
    Tensor back_want = empty(src.shape());
    back_want.copy_(want);
    Tensor back = device_empty(src.shape(), DType::Float32);
    cuda::cast_copy(back, got);
    expect_close(back, back_want, 0.0, 0.0, std::string(dtype_name(to)) + " -> float32");
  }
}

TEST(CastErrors, ShapesMustMatch) {
  Tensor a = device_empty({3}, DType::Float32), b = device_empty({4}, DType::Float32);
  try {
    cuda::cast_copy(a, b);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("copy_: shapes"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Cast, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
