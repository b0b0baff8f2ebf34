// The CUDA comparison, logical, where, isclose and masked_fill kernels (core/cuda/compare.cu) run by
// the kernel emulator against the CPU kernels, bit for bit: every op and dtype, on values full of
// NaN (both signs), infinities, signed zeros, subnormals and ties, with contiguous (vector loads
// with a tail, including a bool output of wider operands), misaligned, broadcast, scalar,
// transposed and empty operands, in-place outputs, in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/elementwise_kernels.h"
#include "core/index_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;

namespace {

class Compare : public emu_test::EmulatedKernel {};

const std::vector<DType> kAllDtypes = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                       DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};

// Values that stress comparisons and selection: NaN of both signs, infinities, signed zeros,
// subnormals (of float32 and float64; 3e-6 is one of float16) and halves of small integers, so
// that ties are frequent. Integer dtypes get small integers (ties again).
Tensor tricky(Shape shape, DType dt, std::mt19937& rng) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> specials = {nan, -nan, inf, -inf, 0.0, -0.0, 1e-40, -1e-40, 1e-310, 3e-6, 1e30};
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (double& x : v) {
    if (dt == DType::Bool)
      x = static_cast<double>(rng() % 2);
    else if (dt == DType::UInt8)
      x = static_cast<double>(rng() % 7);
    else if (!is_floating(dt))
      x = static_cast<double>(static_cast<int>(rng() % 7) - 3);
    else if (rng() % 3 == 0)
      x = specials[rng() % specials.size()];
    else
      x = 0.5 * (static_cast<int>(rng() % 9) - 4);
  }
  return from_vector(v, shape).to(dt);
}

Tensor random_mask(Shape shape, std::mt19937& rng) {
  return tricky(std::move(shape), DType::Bool, rng);
}

// got == want element by element, byte for byte.
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor g = got.contiguous(), w = want.contiguous();
  const size_t size = g.itemsize();
  const auto* gp = static_cast<const unsigned char*>(g.raw_data());
  const auto* wp = static_cast<const unsigned char*>(w.raw_data());
  const std::vector<double> gv = g.to_vector<double>(), wv = w.to_vector<double>();
  int bad = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (std::memcmp(gp + i * size, wp + i * size, size) == 0) continue;
    if (bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << gv[static_cast<size_t>(i)] << ", want "
                    << wv[static_cast<size_t>(i)] << " (bits differ)";
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.numel() << " elements differ";
}

int64_t count_true(const Tensor& t) {
  int64_t n = 0;
  for (bool b : t.to_vector<bool>()) n += b;
  return n;
}

// An output shape and its operands' shapes (each broadcasts to it), with one operand optionally
// the transpose of a contiguous 2-D tensor or starting one element into its buffer (so that it
// cannot take the vector loads).
struct Layout {
  std::string name;
  Shape out;
  std::vector<Shape> in;
  int transposed = -1;
  int misaligned = -1;
};

struct Operand {
  Tensor cpu, dev;  // the same view of a CPU tensor and of its "device" copy
};

Operand make_operand(const Layout& l, int k, const std::function<Tensor(Shape)>& gen) {
  Shape s = l.in[static_cast<size_t>(k)];
  const bool tr = l.transposed == k;
  const int64_t skip = l.misaligned == k ? 1 : 0;
  if (tr) s = {s[1], s[0]};
  Tensor base = gen({numel_of(s) + skip});
  Tensor dev = device_copy(base);
  auto view = [&](const Tensor& t) {
    Tensor v = t.narrow(0, skip, numel_of(s)).view(s);
    if (tr) v = v.t();
    return v.expand(l.out);
  };
  return {view(base), view(dev)};
}

// Sizes are no multiple of the block (256) or of any vector width (2..16 elements).
std::vector<Layout> binary_layouts() {
  return {
      {"contiguous_tail", {1027}, {{1027}, {1027}}},       {"contiguous_small", {7}, {{7}, {7}}},
      {"misaligned_a", {301}, {{301}, {301}}, -1, 0},      {"misaligned_b", {301}, {{301}, {301}}, -1, 1},
      {"broadcast", {5, 6, 13}, {{5, 1, 13}, {1, 6, 13}}}, {"scalar_b", {3, 33}, {{3, 33}, {1}}},
      {"transposed_a", {17, 9}, {{17, 9}, {17, 9}}, 0},    {"empty", {4, 0}, {{4, 0}, {4, 0}}},
  };
}

std::string name_of(DType dt, const Layout& l) {
  return std::string(dtype_name(dt)) + " " + l.name;
}

}  // namespace

TEST_P(Compare, ComparisonsMatchTheCpuBitForBit) {
  std::mt19937 rng(11);
  const std::vector<CompareOp> ops = {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt,
                                      CompareOp::Le, CompareOp::Gt, CompareOp::Ge};
  for (DType dt : kAllDtypes) {
    for (const Layout& l : binary_layouts()) {
      auto gen = [&](Shape s) { return tricky(std::move(s), dt, rng); };
      const Operand a = make_operand(l, 0, gen), b = make_operand(l, 1, gen);
      for (CompareOp op : ops) {
        const std::string what = name_of(dt, l) + " op " + std::to_string(static_cast<int>(op));
        Tensor want = empty(l.out, {.dtype = DType::Bool});
        compare_stub(Device::cpu())(op, want, a.cpu, b.cpu);
        Tensor got = device_empty(l.out, DType::Bool);
        emu::kernel(compare_stub)(op, got, a.dev, b.dev);
        expect_same_bits(got, want, what);
        if (l.name == "contiguous_tail") {  // the inputs give both answers
          EXPECT_GT(count_true(want), 0) << what;
          EXPECT_LT(count_true(want), want.numel()) << what;
        }
      }
    }
  }
}

TEST_P(Compare, NanIsUnequalToEverythingAndSignedZerosAreEqual) {
  // Hand-checked cases (the random test compares with the CPU; this pins the CPU's semantics too).
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

TEST_P(Compare, LogicalOpsMatchTheCpu) {
  std::mt19937 rng(12);
  for (const Layout& l : binary_layouts()) {
    auto gen = [&](Shape s) { return random_mask(std::move(s), rng); };
    const Operand a = make_operand(l, 0, gen), b = make_operand(l, 1, gen);
    for (LogicalOp op : {LogicalOp::And, LogicalOp::Or, LogicalOp::Not}) {
      Tensor want = empty(l.out, {.dtype = DType::Bool});
      logical_stub(Device::cpu())(op, want, a.cpu, b.cpu);
      Tensor got = device_empty(l.out, DType::Bool);
      emu::kernel(logical_stub)(op, got, a.dev, b.dev);
      expect_same_bits(got, want, l.name + " logical op " + std::to_string(static_cast<int>(op)));
    }
  }
}

TEST_P(Compare, WhereMatchesTheCpuBitForBit) {
  std::mt19937 rng(13);
  // Operands: cond, a, b.
  const std::vector<Layout> layouts = {
      {"contiguous_tail", {1027}, {{1027}, {1027}, {1027}}},
      {"misaligned_a", {301}, {{301}, {301}, {301}}, -1, 1},
      {"misaligned_cond", {301}, {{301}, {301}, {301}}, -1, 0},
      {"broadcast", {5, 6, 13}, {{5, 6, 1}, {5, 1, 13}, {1, 6, 13}}},
      {"scalar_a", {3, 33}, {{3, 33}, {1}, {3, 33}}},
      {"scalar_b", {3, 33}, {{3, 1}, {3, 33}, {1}}},
      {"scalar_both", {5, 7}, {{5, 7}, {1}, {1}}},
      {"scalar_a_misaligned_b", {301}, {{301}, {1}, {301}}, -1, 2},
      {"transposed_cond", {17, 9}, {{17, 9}, {17, 9}, {17, 9}}, 0},
      {"transposed_b", {17, 9}, {{17, 9}, {1}, {17, 9}}, 2},
      {"empty", {0, 3}, {{0, 3}, {0, 3}, {0, 3}}},
  };
  for (DType dt : kAllDtypes) {
    for (const Layout& l : layouts) {
      const Operand c = make_operand(l, 0, [&](Shape s) { return random_mask(std::move(s), rng); });
      auto gen = [&](Shape s) { return tricky(std::move(s), dt, rng); };
      const Operand a = make_operand(l, 1, gen), b = make_operand(l, 2, gen);
      Tensor want = empty(l.out, {.dtype = dt});
      where_stub(Device::cpu())(want, c.cpu, a.cpu, b.cpu);
      Tensor got = device_empty(l.out, dt);
      emu::kernel(where_stub)(got, c.dev, a.dev, b.dev);
      expect_same_bits(got, want, name_of(dt, l));
    }
  }
}

TEST_P(Compare, WhereIntoItsOwnOperandAsMaskedFillInPlaceDoes) {
  // masked_fill_ calls where(out = b, cond, scalar, b); b may be a strided view.
  std::mt19937 rng(14);
  for (DType dt : kAllDtypes) {
    for (bool transposed : {false, true}) {
      Tensor base = tricky({9, 17}, dt, rng), cond = random_mask({17, 9}, rng), value = tricky({1}, dt, rng);
      Tensor want_buf = base.clone(), got_buf = device_copy(base);
      Tensor want = transposed ? want_buf.t() : want_buf.view({17, 9});
      Tensor got = transposed ? got_buf.t() : got_buf.view({17, 9});
      where_stub(Device::cpu())(want, cond, value.expand({17, 9}), want);
      emu::kernel(where_stub)(got, device_copy(cond), device_copy(value).expand({17, 9}), got);
      expect_same_bits(got_buf, want_buf, std::string(dtype_name(dt)) + (transposed ? " transposed" : " contiguous"));
    }
  }
}

TEST_P(Compare, MaskedFillMatchesTheCpuBitForBit) {
  std::mt19937 rng(15);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dt : kAllDtypes) {
    std::vector<double> values = {3.0, 0.0};
    if (is_floating(dt)) values = {-nan, -0.0, 2.5, 1e30, -inf, 1e-40};  // 1e30 overflows float16
    if (dt == DType::Int32 || dt == DType::Int64) values.push_back(-7.0);
    if (dt == DType::UInt8) values.push_back(200.0);
    for (const Layout& l : binary_layouts()) {  // operands: a, mask
      const Operand a = make_operand(l, 0, [&](Shape s) { return tricky(std::move(s), dt, rng); });
      const Operand m = make_operand(l, 1, [&](Shape s) { return random_mask(std::move(s), rng); });
      for (double v : values) {
        Tensor want = empty(l.out, {.dtype = dt});
        masked_fill_stub(Device::cpu())(want, a.cpu, m.cpu, v);
        Tensor got = device_empty(l.out, dt);
        emu::kernel(masked_fill_stub)(got, a.dev, m.dev, v);
        expect_same_bits(got, want, name_of(dt, l) + " value " + std::to_string(v));
      }
    }
  }
}

TEST_P(Compare, IsCloseMatchesTheCpu) {
  std::mt19937 rng(16);
  struct Tol {
    double rtol, atol;
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Layout& l : binary_layouts()) {
      const Operand a = make_operand(l, 0, [&](Shape s) { return tricky(std::move(s), dt, rng); });
      // b: a itself, a nudged by a relative or absolute amount, or unrelated, element by element.
      Tensor bv = a.cpu.contiguous().to(DType::Float64);
      std::vector<double> v = bv.to_vector<double>();
      const std::vector<double> other =
          tricky({static_cast<int64_t>(v.size())}, DType::Float64, rng).to_vector<double>();
      for (size_t i = 0; i < v.size(); ++i) {
        switch (rng() % 5) {
          case 0:
            break;
          case 1:
            v[i] *= 1.0 + 3e-6;
            break;
          case 2:
            v[i] *= 1.0 + 3e-3;
            break;
          case 3:
            v[i] += 2e-9;
            break;
          default:
            v[i] = other[i];
        }
      }
      Tensor b_cpu = from_vector(v, l.out).to(dt);
      Tensor b_dev = device_copy(b_cpu);
      for (Tol t : {Tol{1e-5, 1e-8}, Tol{0.0, 0.5}, Tol{1e-2, 0.0}, Tol{0.0, 0.0}}) {
        const std::string what = name_of(dt, l) + " rtol " + std::to_string(t.rtol) + " atol " + std::to_string(t.atol);
        Tensor want = empty(l.out, {.dtype = DType::Bool});
        isclose_stub(Device::cpu())(want, a.cpu, b_cpu, t.rtol, t.atol);
        Tensor got = device_empty(l.out, DType::Bool);
        emu::kernel(isclose_stub)(got, a.dev, b_dev, t.rtol, t.atol);
        expect_same_bits(got, want, what);
        if (l.name == "contiguous_tail") {
          EXPECT_GT(count_true(want), 0) << what;
          EXPECT_LT(count_true(want), want.numel()) << what;
        }
      }
    }
  }
}

TEST(CompareErrors, IsCloseRefusesNonFloatingDtypes) {
  Tensor a = device_copy(randint(0, 3, {5}, {.dtype = DType::Int32}));
  Tensor out = device_empty({5}, DType::Bool);
  test_util::expect_error([&] { emu::kernel(isclose_stub)(out, a, a, 1e-5, 1e-8); }, "isclose", "int32");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Compare, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
