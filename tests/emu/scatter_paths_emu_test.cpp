// Which of its two deterministic paths the CUDA scatter (core/cuda/gather_scatter.cu) takes, counted
// by its launches (1 by fiber; by group: keys, group_by_key's 4, apply), for the cases whose
// results the op table compares with the CPU (tests/ops/op_rows_gather_scatter.cpp); a kernel's
// selection is what a row cannot show. Also the case too large for the table: 16384 fibers of 17
// (longer than a short fiber, but enough fibers for a thread each), by fiber and equal to the CPU,
// in all three thread orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/index_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::expect_close;

namespace {

struct PathCase {
  std::string what;
  Shape out, index, src;
  int64_t dim;
  bool grouped;
  bool strided = false;  // index and src are transposed views (2-D cases)
};

// The cases of the op table's scatter rows, with the path each must take.
const std::vector<PathCase>& path_cases() {
  static const std::vector<PathCase> v = {
      {"short fibers dim 0", {6, 8, 5}, {3, 7, 4}, {4, 9, 5}, 0, false},
      {"short fibers dim 1", {6, 8, 5}, {5, 3, 4}, {6, 4, 6}, 1, false},
      {"short fibers dim 2", {6, 8, 5}, {5, 7, 3}, {7, 8, 4}, 2, false},
      {"long fibers dim 1", {3, 40}, {2, 300}, {3, 301}, 1, true},
      {"long fibers dim 0, strided", {50, 3}, {400, 2}, {401, 3}, 0, true, true},
      {"1-D", {37}, {1000}, {1000}, 0, true},
      {"sparse 1-D (the group keys would outnumber the positions)", {1000}, {40}, {45}, 0, false},
  };
  return v;
}

Tensor maybe_transposed(const Tensor& t, bool strided) {
  return strided ? device_copy(t.t().contiguous()).t() : device_copy(t);
}

class ScatterLongFibers : public emu_test::EmulatedKernel {};

}  // namespace

// The choice depends on the shapes only (not on the dtype or the thread order): one dtype, one order.
TEST(ScatterPaths, EachCaseTakesItsPath) {
  for (bool accumulate : {false, true}) {
    for (const PathCase& c : path_cases()) {
      const std::string what = (accumulate ? "scatter_add " : "scatter ") + c.what;
      Tensor out = device_copy(randn(c.out));
      Tensor idx = maybe_transposed(randint(0, c.out[c.dim], c.index), c.strided);
      Tensor src = maybe_transposed(randn(c.src), c.strided);
      ASSERT_EQ(src.is_contiguous(), !c.strided) << what;
      const uint64_t before = emu::stats().launches;
      emu::kernel(scatter_stub)(out, c.dim, idx, src, accumulate);
      EXPECT_EQ(emu::stats().launches - before, c.grouped ? 6u : 1u) << what << ": wrong path";
    }
  }
}

TEST_P(ScatterLongFibers, ManyLongFibersAreWalkedOneThreadEach) {
  Tensor base = randn({17, 16384});
  Tensor idx = randint(0, 17, {17, 16384});
  Tensor src = randn({17, 16384});
  Tensor want = base.clone();
  scatter_stub(Device::cpu())(want, 0, idx, src, true);
  Tensor got = device_copy(base);
  const uint64_t before = emu::stats().launches;
  emu::kernel(scatter_stub)(got, 0, device_copy(idx), device_copy(src), true);
  EXPECT_EQ(emu::stats().launches - before, 1u) << "expected the by-fiber path";
  // The same additions in the same order: equal, not merely close.
  expect_close(got, want, 0, 0, "16384 fibers");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, ScatterLongFibers, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
