// The CUDA index kernels behind the losses (core/cuda/index_range.cu, gather_scatter.cu,
// one_hot_trilu.cu) run by the kernel emulator against the CPU kernels, in all three thread
// orders: index_range at one and several blocks; gather and scatter for every dtype the CPU
// accepts, along every dim, with strided sources and indices and sizes that are not multiples of a
// block; scatter with many repeated indices, bit for bit equal to the CPU (the last write wins, sums
// in index order) on both of its paths (by fiber and by group); one_hot; tril/triu with every
// dtype, strided inputs and diagonals inside and outside the matrix.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/index_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;
using test_util::expect_error;

namespace {

class Gather : public emu_test::EmulatedKernel {};

const std::vector<DType> kAll = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                 DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
const std::vector<DType> kNumeric = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8};

// Values every dtype holds exactly (floats get a fractional part; bool gets both values).
Tensor sample(Shape shape, DType dt) {
  if (dt == DType::Bool) return randint(0, 2, shape, {.dtype = DType::Float64}).to(dt);
  if (is_floating(dt)) return randn(shape, {.dtype = DType::Float64}).to(dt);
  return randint(0, 120, shape, {.dtype = dt});
}

// The same strided view of a CPU tensor and of its "device" copy.
struct Pair {
  Tensor cpu, dev;
};
Pair pair(const Tensor& t) {
  return {t, device_copy(t)};
}
template <typename F>
Pair view(const Pair& p, const F& f) {
  return {f(p.cpu), f(p.dev)};
}

std::string name(DType dt, int64_t dim, const std::string& what = "") {
  return std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + (what.empty() ? "" : " " + what);
}

}  // namespace

TEST_P(Gather, IndexRangeMatchesTheCpuAtOneAndSeveralBlocks) {
  // 2048 elements per block: one block, one full block plus a tail, and ten blocks (two passes).
  for (int64_t n : {1, 300, 2049, 20000}) {
    Tensor idx = randint(-1000000, 1000000, {n});
    if (n > 2) {
      // The extremes at the ends and in the middle, where a missed element shows.
      idx.data_ptr<int64_t>()[n - 1] = std::numeric_limits<int64_t>::max();
      idx.data_ptr<int64_t>()[n / 2] = std::numeric_limits<int64_t>::min();
    }
    int64_t lo = 0, hi = 0, want_lo = 0, want_hi = 0;
    index_range_stub(Device::cpu())(idx, &want_lo, &want_hi);
    emu::kernel(index_range_stub)(device_copy(idx), &lo, &hi);
    EXPECT_EQ(lo, want_lo) << n;
    EXPECT_EQ(hi, want_hi) << n;
  }
  // All equal, and a single negative element.
  int64_t lo = 0, hi = 0;
  emu::kernel(index_range_stub)(device_copy(full({777}, 5, {.dtype = DType::Int64})), &lo, &hi);
  EXPECT_EQ(lo, 5);
  EXPECT_EQ(hi, 5);
  emu::kernel(index_range_stub)(device_copy(full({1}, -3, {.dtype = DType::Int64})), &lo, &hi);
  EXPECT_EQ(lo, -3);
  EXPECT_EQ(hi, -3);
}

TEST_P(Gather, IndexRangeRejectsAnEmptyOrStridedIndex) {
  int64_t lo = 0, hi = 0;
  expect_error([&] { emu::kernel(index_range_stub)(device_copy(empty({0}, {.dtype = DType::Int64})), &lo, &hi); },
               "index_range", "empty");
  Tensor strided = device_copy(randint(0, 5, {4, 3})).t();
  expect_error([&] { emu::kernel(index_range_stub)(strided, &lo, &hi); }, "index_range", "contiguous int64");
}

TEST_P(Gather, GatherMatchesTheCpuForEveryDtypeAndDim) {
  for (DType dt : kAll) {
    for (int64_t dim : {0, 1, 2}) {
      for (bool strided : {false, true}) {
        // src [5, 7, 6]: contiguous, or a permuted and narrowed view of a larger tensor.
        Pair src = strided ? view(pair(sample({8, 6, 5}, dt)),
                                  [](const Tensor& t) {
                                    return t.narrow(0, 1, 7).permute({2, 0, 1});
                                  })
                           : pair(sample({5, 7, 6}, dt));
        // index smaller than src in the other dims, longer along dim; strided when src is.
        Shape is = {4, 6, 5};
        is[dim] = 9;
        Tensor idx_c = randint(0, src.cpu.size(dim), is);
        Pair idx =
            strided ? view(pair(idx_c.transpose(0, 2).contiguous()), [](const Tensor& t) { return t.transpose(0, 2); })
                    : pair(idx_c);
        Tensor want = empty(is, {.dtype = dt});
        gather_stub(Device::cpu())(want, src.cpu, dim, idx.cpu);
        Tensor got = device_empty(is, dt);
        emu::kernel(gather_stub)(got, src.dev, dim, idx.dev);
        expect_close(got, want, 0, 0, name(dt, dim, strided ? "strided" : ""));
      }
    }
  }
}

TEST_P(Gather, GatherOfOneElementAndOfAnEmptyIndex) {
  Tensor src = randn({1});
  Tensor idx = zeros({1}, {.dtype = DType::Int64});
  Tensor got = device_empty({1}, DType::Float32);
  emu::kernel(gather_stub)(got, device_copy(src), 0, device_copy(idx));
  EXPECT_EQ(got.item<float>(), src.item<float>());
  Tensor none = device_empty({0, 3}, DType::Float32);
  emu::kernel(gather_stub)(none, device_copy(randn({2, 3})), 0, device_copy(zeros({0, 3}, {.dtype = DType::Int64})));
}

namespace {

struct ScatterCase {
  std::string what;
  Shape out, index, src;
  int64_t dim;
  bool grouped;          // which path the kernel must take (counted by its launches)
  bool strided = false;  // index and src are transposed views (2-D cases)
};

// Launches of one scatter: 1 by fiber; by group: keys, group_by_key's 4, apply.
int64_t expected_launches(const ScatterCase& c) {
  return c.grouped ? 6 : 1;
}

const std::vector<ScatterCase>& scatter_cases() {
  static const std::vector<ScatterCase> v = {
      // Short fibers (len 3) with a src larger than the index, in every dim of a 3-D out.
      {"short fibers dim 0", {6, 8, 5}, {3, 7, 4}, {4, 9, 5}, 0, false},
      {"short fibers dim 1", {6, 8, 5}, {5, 3, 4}, {6, 4, 6}, 1, false},
      {"short fibers dim 2", {6, 8, 5}, {5, 7, 3}, {7, 8, 4}, 2, false},
      // Few long fibers with about 8 repeats of every index: by group, along either dim, with
      // strided index and src.
      {"long fibers dim 1", {3, 40}, {2, 300}, {3, 301}, 1, true},
      {"long fibers dim 0", {50, 3}, {400, 2}, {401, 3}, 0, true, true},
      {"1-D", {37}, {1000}, {1000}, 0, true},
      // Few indices into a long out: by fiber (the group keys would outnumber the positions).
      {"sparse 1-D", {1000}, {40}, {45}, 0, false},
  };
  return v;
}

// A CPU tensor and its device copy, transposed (2-D) when `strided`.
Pair maybe_strided(const Tensor& t, bool strided) {
  if (!strided) return pair(t);
  return view(pair(t.t().contiguous()), [](const Tensor& x) { return x.t(); });
}

void check_scatter(DType dt, bool accumulate) {
  for (const ScatterCase& c : scatter_cases()) {
    const std::string what = std::string(dtype_name(dt)) + (accumulate ? " add " : " ") + c.what;
    Tensor base = sample(c.out, dt);
    Pair src = maybe_strided(sample(c.src, dt), c.strided);
    Pair idx = maybe_strided(randint(0, c.out[c.dim], c.index), c.strided);
    ASSERT_EQ(src.dev.is_contiguous(), !c.strided) << what;
    Tensor want = base.clone();
    scatter_stub(Device::cpu())(want, c.dim, idx.cpu, src.cpu, accumulate);
    Tensor got = device_copy(base);
    const uint64_t before = emu::stats().launches;
    emu::kernel(scatter_stub)(got, c.dim, idx.dev, src.dev, accumulate);
    EXPECT_EQ(static_cast<int64_t>(emu::stats().launches - before), expected_launches(c)) << what << ": wrong path";
    // The same writes and additions in the same order: equal, not merely close.
    expect_close(got, want, 0, 0, what);
  }
}

}  // namespace

TEST_P(Gather, ScatterLastWriteWinsLikeTheCpuForEveryDtype) {
  for (DType dt : kAll) check_scatter(dt, false);
}

TEST_P(Gather, ScatterAddSumsRepeatsInIndexOrderBitForBit) {
  for (DType dt : kNumeric) check_scatter(dt, true);
}

TEST_P(Gather, ScatterAddOverManyLongFibersWalksEachFiber) {
  // 16384 fibers of 17: longer than a short fiber, but enough fibers for a thread each.
  Tensor base = randn({17, 16384});
  Tensor idx = randint(0, 17, {17, 16384});
  Tensor src = randn({17, 16384});
  Tensor want = base.clone();
  scatter_stub(Device::cpu())(want, 0, idx, src, true);
  Tensor got = device_copy(base);
  const uint64_t before = emu::stats().launches;
  emu::kernel(scatter_stub)(got, 0, device_copy(idx), device_copy(src), true);
  EXPECT_EQ(emu::stats().launches - before, 1u) << "expected the by-fiber path";
  expect_close(got, want, 0, 0, "16384 fibers");
}

TEST_P(Gather, ScatterAddRejectsDtypesItCannotAdd) {
  for (DType dt : {DType::Bool, DType::Float16, DType::BFloat16}) {
    Tensor out = device_copy(zeros({4}, {.dtype = dt}));
    Tensor idx = device_copy(zeros({2}, {.dtype = DType::Int64}));
    Tensor src = device_copy(zeros({2}, {.dtype = dt}));
    expect_error([&] { emu::kernel(scatter_stub)(out, 0, idx, src, true); }, "scatter_add", "is not supported");
  }
}

TEST_P(Gather, ScatterWithABroadcastSrcAndAnEmptyIndex) {
  // ScatterBackward zeroes the overwritten positions with an expanded (stride 0) zero.
  Tensor base = randn({4, 30});
  Tensor idx = randint(0, 30, {4, 25});
  Tensor z = zeros({}).expand({4, 25});
  Tensor want = base.clone();
  scatter_stub(Device::cpu())(want, 1, idx, z, false);
  Tensor got = device_copy(base);
  emu::kernel(scatter_stub)(got, 1, device_copy(idx), device_copy(zeros({1})).expand({4, 25}), false);
  expect_close(got, want, 0, 0, "broadcast zero");
  Tensor none = device_copy(base);
  emu::kernel(scatter_stub)(none, 1, device_copy(zeros({4, 0}, {.dtype = DType::Int64})), device_copy(z), true);
  expect_close(none, base, 0, 0, "empty index");
}

TEST_P(Gather, OneHotMatchesTheCpu) {
  for (Shape labels_shape : std::vector<Shape>{{1}, {37}, {3, 7}, {300}}) {
    for (int64_t classes : {1, 5, 129}) {
      Tensor labels = randint(0, classes, labels_shape);
      Shape os = labels_shape;
      os.push_back(classes);
      Tensor want = empty(os, {.dtype = DType::Int64});
      one_hot_stub(Device::cpu())(want, labels);
      Tensor got = device_empty(os, DType::Int64);
      emu::kernel(one_hot_stub)(got, device_copy(labels));
      expect_close(got, want, 0, 0, shape_str(os));
    }
  }
}

TEST_P(Gather, TriluMatchesTheCpuForEveryDtypeStridedAndEveryDiagonal) {
  struct Layout {
    std::string what;
    Shape stored;
    std::vector<int64_t> perm;  // the view of the stored tensor that is trilu'd
  };
  const std::vector<Layout> layouts = {
      {"5x7", {5, 7}, {0, 1}},
      {"batched 3x6x4", {3, 6, 4}, {0, 1, 2}},
      {"transposed matrices", {2, 3, 9, 8}, {0, 1, 3, 2}},
      {"permuted batch", {4, 2, 5, 3}, {1, 0, 3, 2}},
  };
  for (DType dt : kAll) {
    for (const Layout& l : layouts) {
      Pair a = view(pair(sample(l.stored, dt)), [&](const Tensor& t) { return t.permute(l.perm); });
      for (int64_t diagonal : {-20, -2, -1, 0, 1, 3, 20}) {
        for (bool upper : {false, true}) {
          Tensor want = empty(a.cpu.shape(), {.dtype = dt});
          trilu_stub(Device::cpu())(want, a.cpu, diagonal, upper);
          Tensor got = device_empty(a.cpu.shape(), dt);
          emu::kernel(trilu_stub)(got, a.dev, diagonal, upper);
          expect_close(
              got, want, 0, 0,
              std::string(dtype_name(dt)) + " " + l.what + (upper ? " triu " : " tril ") + std::to_string(diagonal));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Gather, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
