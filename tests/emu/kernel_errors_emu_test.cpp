// Errors the emulated CUDA kernels raise themselves, with arguments no op passes them (the op
// layer checks first, so the op table cannot reach these messages): integer division, an
// out-of-range cross-entropy target, a dtype-converting copy between different shapes, a pooling
// geometry past 32-bit indexing. The
// kernels' results are the op table's (tests/ops); these only pin the kernels' own checks.
#include <gtest/gtest.h>

#include <string>

#include "core/cuda/cast.h"
#include "core/elementwise_kernels.h"
#include "core/nn_kernels.h"
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
