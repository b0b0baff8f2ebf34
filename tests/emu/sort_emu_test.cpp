// The CUDA sort/topk kernel (core/cuda/sort.cu) run by the kernel emulator against the CPU kernel:
// every dtype, every dim, strided inputs, many ties, NaN/inf/-0, k = 1, k = n and in between,
// largest and smallest, rows that fit the shared-memory bitonic sort (short ones several to a
// block) and rows longer than it (chunks, then the merge passes), in all three thread orders. The
// result must be the CPU's bit for bit: the same value bits and the same indices.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/index_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;

namespace {

class Sort : public emu_test::EmulatedKernel {};

// Few distinct values (many ties) and, for floating dtypes, NaN, +-inf and -0 among them.
Tensor tied_values(Shape shape, DType dt, uint64_t seed) {
  Generator gen(seed);
  const bool fp = is_floating(dt);
  const int64_t lo = dt == DType::Bool ? 0 : dt == DType::UInt8 ? 0 : -3, hi = dt == DType::Bool ? 2 : 4;
  std::vector<double> v = randint(lo, hi, shape, {.dtype = DType::Float64}, &gen).to_vector<double>();
  if (fp) {
    const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                               std::numeric_limits<double>::infinity(),
                               -std::numeric_limits<double>::infinity(),
                               -0.0,
                               0.0,
                               0.5};
    for (size_t i = 0; i < v.size(); i += 5) v[i] = specials[(i / 5 + seed) % 6];
  }
  return from_vector<double>(v, shape).to(dt);
}

// Equal bits element by element (so -0 differs from +0 and NaN payloads count).
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Tensor g = got.contiguous(), w = want.contiguous();
  const size_t item = g.itemsize();
  const auto* gp = static_cast<const unsigned char*>(g.raw_data());
  const auto* wp = static_cast<const unsigned char*>(w.raw_data());
  int bad = 0;
  for (int64_t i = 0; i < g.numel(); ++i)
    if (std::memcmp(gp + i * item, wp + i * item, item) != 0 && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " differs";
  EXPECT_EQ(bad, 0) << what;
}

// Sorts `a` (a CPU tensor; `dev` the same values as a "device" tensor or a view of one) along dim
// with both kernels and compares values and indices bit for bit.
void check(const Tensor& a, const Tensor& dev, int64_t dim, int64_t k, bool largest, const std::string& what) {
  Shape os = a.shape();
  os[dim] = k;
  Tensor wv = empty(os, {.dtype = a.dtype()}), wi = empty(os, {.dtype = DType::Int64});
  sort_stub(Device::cpu())(wv, wi, a, dim, largest);
  Tensor gv = device_empty(os, a.dtype()), gi = device_empty(os, DType::Int64);
  emu::kernel(sort_stub)(gv, gi, dev, dim, largest);
  const std::string w = what + " dim " + std::to_string(dim) + " k " + std::to_string(k) +
                        (largest ? " largest" : " smallest") + " " + dtype_name(a.dtype());
  expect_same_bits(gv, wv, w + " values");
  EXPECT_EQ(gi.to_vector<int64_t>(), wi.to_vector<int64_t>()) << w << " indices";
}

}  // namespace

TEST_P(Sort, ShortRowsEveryDtypeAndDimMatchTheCpuBitForBit) {
  const DType all[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                       DType::Int32,   DType::Int64,   DType::UInt8,   DType::Bool};
  for (DType dt : all) {
    // Rows of 5 (dim 0: 64 rows per block), 37 (dim 1: 8 per block) and 3 (dim 2), the first two
    // with neighbouring rows adjacent in memory (the interleaved loads).
    Tensor a = tied_values({5, 37, 3}, dt, 11);
    Tensor dev = device_copy(a);
    for (int64_t dim : {0, 1, 2}) {
      const int64_t n = a.size(dim);
      for (bool largest : {false, true}) {
        check(a, dev, dim, n, largest, "sort");
        check(a, dev, dim, n / 2 + 1, largest, "topk");
      }
    }
  }
}

TEST_P(Sort, TopOneAndLengthOneRows) {
  for (DType dt : {DType::Float32, DType::Int64}) {
    Tensor a = tied_values({6, 29}, dt, 3);
    for (bool largest : {false, true}) {
      check(a, device_copy(a), 1, 1, largest, "top 1");
      check(a, device_copy(a), 0, 1, largest, "top 1");
    }
    Tensor one = tied_values({4, 1, 7}, dt, 5);  // rows of one element
    check(one, device_copy(one), 1, 1, true, "n = 1");
  }
}

TEST_P(Sort, StridedInputsMatchTheCpu) {
  Tensor base = tied_values({7, 4, 33}, DType::Float32, 8);
  Tensor dev = device_copy(base);
  // The same strided view of the CPU tensor and of the device copy.
  const Tensor cpu_t = base.transpose(0, 2), dev_t = dev.transpose(0, 2);  // [33, 4, 7]
  for (int64_t dim : {0, 2}) check(cpu_t, dev_t, dim, cpu_t.size(dim), dim == 0, "transposed");
  const Tensor cpu_n = base.narrow(2, 3, 20), dev_n = dev.narrow(2, 3, 20);
  check(cpu_n, dev_n, 2, 9, false, "narrowed");
  check(cpu_n, dev_n, 1, 4, true, "narrowed");
  // Ten dims reversed: nine scattered row dims, more than the kernel's row layout holds, so it
  // sorts a contiguous copy.
  Tensor deep = tied_values({3, 2, 2, 2, 2, 2, 2, 2, 2, 2}, DType::Float32, 12);
  const std::vector<int64_t> rev = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  check(deep.permute(rev), device_copy(deep).permute(rev), 9, 3, true, "ten dims");
}

// Longer rows than the shared-memory sort takes (4096 entries with 32-bit keys, 2048 with 64-bit
// ones): chunks, then merge passes, including a last chunk and a last run without a partner.
TEST_P(Sort, LongRowsGoThroughTheMergePasses) {
  struct Case {
    DType dt;
    Shape shape;
    int64_t dim, k;
    bool largest;
  };
  const Case cases[] = {
      {DType::Float32, {2, 9000}, 1, 9000, false}, {DType::Float32, {2, 9000}, 1, 5000, true},
      {DType::Float32, {9000, 2}, 0, 700, true},   {DType::Float16, {1, 8200}, 1, 1, false},
      {DType::Float64, {2, 4500}, 1, 4500, true},  {DType::Float64, {2, 4500}, 1, 2100, false},
      {DType::Int64, {1, 2049}, 1, 2049, false},
  };
  for (const Case& c : cases) {
    Tensor a = tied_values(c.shape, c.dt, 21);
    check(a, device_copy(a), c.dim, c.k, c.largest, "long rows " + shape_str(c.shape));
  }
  // With ties broken by position the first k of tied data mostly come from the row's start;
  // distinct values draw them from every chunk, so every merge pass decides some of them.
  Generator gen(5);
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor a = randn({2, 9000}, {.dtype = dt}, &gen);
    for (int64_t k : {int64_t{700}, int64_t{3000}})
      for (bool largest : {false, true}) check(a, device_copy(a), 1, k, largest, "distinct long rows");
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Sort, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
