// The CUDA deterministic index_add (core/cuda/index.cu; the embedding layer's and index_select's
// backward) run by the kernel emulator against the CPU kernel, bit for bit: the CPU's index-order
// sums, with indices with many repeats (the backward's groups) and more positions than a block,
// in float32, float64 and int64 (which no op's backward reaches), in all three thread orders. The
// op table runs index_select and its backward through the ops (tests/ops/op_rows_dtypes.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/index_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::expect_close;

namespace {
class Index : public emu_test::EmulatedKernel {};
}  // namespace

TEST_P(Index, IndexAddSumsRepeatsInIndexOrderLikeTheCpu) {
  struct Case {
    Shape out;
    int64_t dim, m, distinct;
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
    for (const Case& c : {Case{{7, 6}, 0, 300, 5}, Case{{50, 3}, 0, 40, 50}, Case{{3, 11, 2}, 1, 600, 11}}) {
      Tensor idx = randint(0, c.distinct, {c.m});
      Shape ss = c.out;
      ss[c.dim] = c.m;
      Tensor src = is_floating(dt) ? randn(ss, {.dtype = dt}) : randint(-9, 10, ss, {.dtype = dt});
      Tensor base = is_floating(dt) ? randn(c.out, {.dtype = dt}) : randint(-9, 10, c.out, {.dtype = dt});
      Tensor want = base.clone();
      index_add_stub(Device::cpu())(want, c.dim, idx, src);
      Tensor got = device_copy(base);
      emu::kernel(index_add_stub)(got, c.dim, device_copy(idx), device_copy(src));
      // The same additions in the same order: equal, not merely close.
      expect_close(got, want, 0, 0, std::string(dtype_name(dt)) + " " + shape_str(c.out));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Index, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
