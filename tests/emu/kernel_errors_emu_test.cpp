// Errors the emulated CUDA kernels raise themselves, with arguments no op passes them (the op
// layer checks first, so the op table cannot reach these messages): integer division, an
// out-of-range cross-entropy target, a dtype-converting copy between different shapes, a pooling
// geometry past 32-bit indexing, an empty or strided index range, scatter_add of dtypes it cannot
// add, isclose of integers, an integer mean, an empty argmax, a same-dtype copy of mismatched
// operands, a GEMM or dot of integers, a GEMM past 2^31 or with a negative batch stride, a
// convolution past 32-bit indexing, a batch norm evaluation without running statistics. The
// kernels' results are the op table's (tests/ops); these only pin the kernels' own checks.
#include <gtest/gtest.h>

#include <string>

#include "core/cuda/cast.h"
#include "core/cuda/copy_kernel.h"
#include "core/elementwise_kernels.h"
#include "core/gemm_kernels.h"
#include "core/index_kernels.h"
#include "core/nn_kernels.h"
#include "core/reduce_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;

TEST(KernelErrors, IntegerDivisionIsRefused) {
  Tensor a = device_copy(randint(-3, 4, {4}, {.dtype = DType::Int32}));
  test_util::expect_error([&] { emu::kernel(binary_stub)(BinaryOp::Div, a, a, a, 1.0); }, "div", "integer operands");
}

TEST(KernelErrors, OutOfRangeCrossEntropyTargetIsReported) {
  Tensor x = device_copy(randn({4, 6, 1}));
  Tensor t = device_copy(tensor({1, 2, 6, 0}, {.dtype = DType::Int64}).view({4, 1}));
  Tensor loss = device_empty({4, 1}, DType::Float32), lse = device_empty({4, 1}, DType::Float32),
         tw = device_empty({}, DType::Float32);
  test_util::expect_error([&] { emu::kernel(cross_entropy_forward_stub)(loss, lse, tw, x, t, Tensor(), {}); },
                          "cross_entropy", "target 6 is out of range for 6 classes");
}

TEST(KernelErrors, CastCopyShapesMustMatch) {
  Tensor a = device_empty({3}, DType::Float32), b = device_empty({4}, DType::Float32);
  test_util::expect_error([&] { cuda::cast_copy(a, b); }, "copy_: shapes");
}

TEST(KernelErrors, APoolingGeometryPast32BitIndexingIsAnError) {
  Pool2dGeometry g;
  g.P = 1, g.H = 4, g.W = int64_t{1} << 31, g.kh = 2, g.kw = 2, g.sh = 2, g.sw = 2, g.ph = 0, g.pw = 0;
  g.OH = 2, g.OW = 2;
  Tensor t = device_empty({1}, DType::Float32), i = device_empty({1}, DType::Int64);
  test_util::expect_error([&] { emu::kernel(max_pool2d_forward_stub)(t, i, t, g); }, "max_pool2d", "32-bit");
  test_util::expect_error([&] { emu::kernel(avg_pool2d_backward_stub)(t, t, g); }, "avg_pool2d_backward", "32-bit");
}

TEST(KernelErrors, AnEmptyOrStridedIndexRangeIsRefused) {
  int64_t lo = 0, hi = 0;
  test_util::expect_error(
      [&] { emu::kernel(index_range_stub)(device_copy(empty({0}, {.dtype = DType::Int64})), &lo, &hi); }, "index_range",
      "empty");
  Tensor strided = device_copy(randint(0, 5, {4, 3})).t();
  test_util::expect_error([&] { emu::kernel(index_range_stub)(strided, &lo, &hi); }, "index_range", "contiguous int64");
}

TEST(KernelErrors, ScatterAddOfDtypesItCannotAddIsRefused) {
  for (DType dt : {DType::Bool, DType::Float16, DType::BFloat16}) {
    Tensor out = device_copy(zeros({4}, {.dtype = dt}));
    Tensor idx = device_copy(zeros({2}, {.dtype = DType::Int64}));
    Tensor src = device_copy(zeros({2}, {.dtype = dt}));
    test_util::expect_error([&] { emu::kernel(scatter_stub)(out, 0, idx, src, true); }, "scatter_add",
                            "is not supported");
  }
}

TEST(KernelErrors, IsCloseOfIntegersIsRefused) {
  Tensor a = device_copy(randint(0, 3, {5}, {.dtype = DType::Int32}));
  Tensor out = device_empty({5}, DType::Bool);
  test_util::expect_error([&] { emu::kernel(isclose_stub)(out, a, a, 1e-5, 1e-8); }, "isclose", "int32");
}

TEST(KernelErrors, AnIntegerMeanAndAnEmptyArgmaxAreRefused) {
  Tensor x = device_copy(randint(-5, 6, {3, 4}, {.dtype = DType::Int32}));
  Tensor out = device_empty({3}, DType::Int32);
  test_util::expect_error([&] { emu::kernel(reduce_stub)(ReduceOp::Mean, out, x, 1, 0); }, "mean", "floating-point");
  Tensor e = device_empty({3, 0}, DType::Float32);
  Tensor idx = device_empty({3}, DType::Int64);
  test_util::expect_error([&] { emu::kernel(arg_reduce_stub)(ArgReduceOp::Max, Tensor(), idx, e, 1); }, "argmax",
                          "nonzero");
}

TEST(KernelErrors, ASameDtypeCopyOfMismatchedOperandsIsRefused) {
  Tensor a = device_empty({4, 5}, DType::Float32);
  test_util::expect_error(
      [&] {
        cuda::copy_same_dtype_on_device(a, device_empty({4, 5}, DType::Int32));
      },
      "copy_same_dtype_on_device", "differ in dtype, shape or device");
  test_util::expect_error(
      [&] {
        cuda::copy_same_dtype_on_device(a, device_empty({5, 4}, DType::Float32));
      },
      "copy_same_dtype_on_device", "differ in dtype, shape or device");
  // An empty copy is no error and launches nothing (the device's copies skip it before the kernel).
  const uint64_t before = emu::stats().launches;
  cuda::copy_same_dtype_on_device(device_empty({0, 3}, DType::Float32), device_empty({0, 3}, DType::Float32));
  EXPECT_EQ(emu::stats().launches, before);
}

TEST(KernelErrors, GemmAndDotArgumentsTheKernelsCannotTakeAreRefused) {
  Tensor t = device_copy(zeros({4}));
  GemmArgs g;
  g.dtype = DType::Int32, g.m = 1, g.n = 1, g.k = 1, g.a = g.b = g.c = t.raw_data();
  test_util::expect_error([&] { emu::kernel(gemm_stub)(g); }, "gemm",
                          "dtype int32; expected float32, float64, bfloat16 or float16");
  g.dtype = DType::Float32, g.m = int64_t{1} << 32;
  test_util::expect_error([&] { emu::kernel(gemm_stub)(g); }, "gemm", "2^31");
  g.m = 1;
  test_util::expect_error([&] { emu::kernel(gemm_batched_stub)(g, 2, -1, 0, 1); }, "gemm", "non-negative strides");
  test_util::expect_error(
      [&] { emu::kernel(dot_stub)(DType::Int64, 1, t.raw_data(), 1, t.raw_data(), 1, t.raw_data()); }, "dot",
      "float32 or float64");
}

// The kernels index in 32 bits; a geometry past that is refused before any memory is touched.
TEST(KernelErrors, AConvGeometryPast32BitIndexingIsAnError) {
  ConvGeometry g;
  g.N = int64_t{1} << 18;  // 2^32 output pixels
  g.C = 1, g.H = 128, g.W = 128, g.OC = 1, g.KH = 1, g.KW = 1, g.OH = 128, g.OW = 128;
  Tensor t = device_empty({1}, DType::Float32);
  test_util::expect_error([&] { emu::kernel(conv2d_forward_stub)(t, t, t, Tensor(), g); }, "conv2d", "32-bit");
  test_util::expect_error([&] { emu::kernel(conv2d_backward_input_stub)(t, t, t, Tensor(), g); },
                          "conv2d_backward_input", "32-bit");
  test_util::expect_error([&] { emu::kernel(conv2d_backward_weight_stub)(t, Tensor(), t, t, g); },
                          "conv2d_backward_weight", "32-bit");
}

TEST(KernelErrors, BatchNormEvaluationWithoutRunningStatisticsIsRefused) {
  Tensor x = device_copy(randn({2, 3, 4})), y = device_empty({2, 3, 4}, DType::Float32);
  Tensor sm = device_empty({3}, DType::Float64), si = device_empty({3}, DType::Float64);
  BatchNormArgs args;
  args.training = false;
  test_util::expect_error(
      [&] { emu::kernel(batch_norm_forward_stub)(y, sm, si, x, Tensor(), Tensor(), Tensor(), Tensor(), args); },
      "batch_norm", "running_mean");
}
