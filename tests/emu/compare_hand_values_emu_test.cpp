// The emulated CUDA comparisons (core/cuda/compare.cu) on hand-checked values: NaN is unequal to
// everything, -0 equals +0, infinities compare as numbers, in every floating dtype. The op table
// compares these kernels with the CPU's on such values (tests/ops/op_rows_compare.cpp), which
// cannot say what the right answer is; tests/core pins it by hand for float64 only, so the hand
// values of the other dtypes stay here.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/elementwise_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;

namespace {
class CompareHandValues : public emu_test::EmulatedKernel {};
}  // namespace

TEST_P(CompareHandValues, NanIsUnequalToEverythingAndSignedZerosAreEqual) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    Tensor a = from_vector<double>({nan, nan, 0.0, -0.0, inf, 1.0, -inf}, {7}).to(dt);
    Tensor b = from_vector<double>({nan, 1.0, -0.0, 0.0, inf, nan, 1.0}, {7}).to(dt);
    struct Case {
      CompareOp op;
      std::vector<bool> want;
    };
    for (const Case& c : {Case{CompareOp::Eq, {false, false, true, true, true, false, false}},
                          Case{CompareOp::Ne, {true, true, false, false, false, true, true}},
                          Case{CompareOp::Lt, {false, false, false, false, false, false, true}},
                          Case{CompareOp::Ge, {false, false, true, true, true, false, false}}}) {
      Tensor got = device_empty({7}, DType::Bool);
      emu::kernel(compare_stub)(c.op, got, device_copy(a), device_copy(b));
      EXPECT_EQ(got.to_vector<bool>(), c.want) << dtype_name(dt) << " op " << static_cast<int>(c.op);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, CompareHandValues, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
