// Rows: the comparison, logical, where, masked_fill and isclose kernels (core/elementwise_kernels.h,
// core/index_kernels.h, called directly on the backend's device with the broadcast operands the op
// layer hands them) in every dtype, on values full of NaN of both signs, infinities, signed zeros,
// subnormals and ties, through every operand layout the kernels treat differently: contiguous with
// a tail (vector loads, also of a bool output from wider operands), shorter than a vector,
// misaligned by one element, broadcast, a one-element operand, transposed, empty; where with
// scalar sides and into its own operand (as masked_fill_ calls it). Comparisons give bools;
// where and masked_fill are compared by their raw bits (NaN payloads and signs, -0), as they move
// bits. These rows took over tests/emu's comparison checks.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/elementwise_kernels.h"
#include "core/index_kernels.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

const std::vector<DType> kAll = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                 DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};

// Values that stress comparisons and selection: NaN of both signs, infinities, signed zeros,
// subnormals (of float32 and float64; 3e-6 is one of float16), an overflow of float16, and halves
// of small integers, so that ties are frequent. Integer dtypes get small integers (ties again).
Tensor tricky(Generator& g, Shape shape, DType dt) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> specials = {nan, -nan, inf, -inf, 0.0, -0.0, 1e-40, -1e-40, 1e-310, 3e-6, 1e30};
  const std::vector<int64_t> r =
      randint(0, int64_t{1} << 30, {numel_of(shape)}, {.dtype = DType::Int64}, &g).to_vector<int64_t>();
  std::vector<double> v;
  for (int64_t x : r) {
    if (dt == DType::Bool)
      v.push_back(static_cast<double>(x % 2));
    else if (dt == DType::UInt8)
      v.push_back(static_cast<double>(x % 7));
    else if (!is_floating(dt))
      v.push_back(static_cast<double>(x % 7 - 3));
    else if (x % 3 == 0)
      v.push_back(specials[static_cast<size_t>(x / 3 % 11)]);
    else
      v.push_back(0.5 * static_cast<double>(x / 3 % 9 - 4));
  }
  return from_vector<double>(v, std::move(shape)).to(dt);
}
Tensor mask(Generator& g, Shape shape) {
  return tricky(g, std::move(shape), DType::Bool);
}

// An output shape and its operands' shapes (each broadcasts to it), with one operand optionally
// the transpose of a contiguous 2-D tensor or starting one element into its buffer (so that it
// cannot take the vector loads). Sizes are no multiple of the block (256) or of any vector width.
struct Layout {
  const char* name;
  Shape out;
  std::vector<Shape> in;
  int transposed = -1;
  int misaligned = -1;
};
const std::vector<Layout>& binary_layouts() {
  static const std::vector<Layout> v = {
      {"contiguous_tail", {1027}, {{1027}, {1027}}},       {"contiguous_small", {7}, {{7}, {7}}},
      {"misaligned_a", {301}, {{301}, {301}}, -1, 0},      {"misaligned_b", {301}, {{301}, {301}}, -1, 1},
      {"broadcast", {5, 6, 13}, {{5, 1, 13}, {1, 6, 13}}}, {"scalar_b", {3, 33}, {{3, 33}, {1}}},
      {"transposed_a", {17, 9}, {{17, 9}, {17, 9}}, 0},    {"empty", {4, 0}, {{4, 0}, {4, 0}}},
  };
  return v;
}

// Operand k's buffer (1-D, what the row's inputs hold) and the view of it the kernel gets.
Shape stored_shape(const Layout& l, int k) {
  const Shape s = l.in[static_cast<size_t>(k)];
  return l.transposed == k ? Shape{s[1], s[0]} : s;
}
Tensor operand_buffer(Generator& g, const Layout& l, int k, DType dt) {
  return tricky(g, {numel_of(stored_shape(l, k)) + (l.misaligned == k ? 1 : 0)}, dt);
}
Tensor operand(const Tensor& buffer, const Layout& l, int k) {
  const Shape s = stored_shape(l, k);
  Tensor v = buffer.narrow(0, l.misaligned == k ? 1 : 0, numel_of(s)).view(s);
  if (l.transposed == k) v = v.t();
  return v.expand(l.out);
}

OpRow exact(std::string name, std::function<Inputs(Generator&)> inputs, std::function<Tensor(const Inputs&)> f) {
  OpRow r{std::move(name), std::move(inputs), std::move(f), 0.0, false, false, false};
  r.cross_reference = true;
  return r;
}

Tensor flat_cat(const std::vector<Tensor>& ts) {
  std::vector<Tensor> f;
  for (const Tensor& t : ts) f.push_back(t.reshape({-1}));
  return cat(f, 0);
}

}  // namespace

namespace {

void add_comparison_layout_rows(std::vector<OpRow>& t) {
  for (DType dt : kAll) {
    for (const Layout& l : binary_layouts()) {
      const std::string tag = std::string(dtype_name(dt)) + "_" + l.name;
      t.push_back(exact(
          "compare_kernel_" + tag,
          [l, dt](Generator& g) {
            return Inputs{operand_buffer(g, l, 0, dt), operand_buffer(g, l, 1, dt)};
          },
          [l](const Inputs& x) {
            std::vector<Tensor> r;
            for (CompareOp op :
                 {CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge}) {
              const Tensor out = empty(l.out, {.dtype = DType::Bool, .device = x[0].device()});
              compare_stub(out.device())(op, out, operand(x[0], l, 0), operand(x[1], l, 1));
              r.push_back(out);
            }
            return flat_cat(r);
          }));
      // The fill values: a negative NaN, -0, values the dtype rounds, overflows (1e30 in
      // float16) or wraps (200 in uint8), a subnormal.
      std::vector<double> values = {3.0, 0.0};
      if (is_floating(dt)) values = {-std::numeric_limits<double>::quiet_NaN(), -0.0, 2.5, 1e30, -INFINITY, 1e-40};
      if (dt == DType::Int32 || dt == DType::Int64) values.push_back(-7.0);
      if (dt == DType::UInt8) values.push_back(200.0);
      t.push_back(exact(
          "masked_fill_kernel_" + tag,
          [l, dt](Generator& g) {
            return Inputs{operand_buffer(g, l, 0, dt), operand_buffer(g, l, 1, DType::Bool)};
          },
          [l, dt, values](const Inputs& x) {
            std::vector<Tensor> r;
            for (double v : values) {
              const Tensor out = empty(l.out, {.dtype = dt, .device = x[0].device()});
              masked_fill_stub(out.device())(out, operand(x[0], l, 0), operand(x[1], l, 1), v);
              r.push_back(raw_bits(out));
            }
            return cat(r, 0);
          }));
    }
  }

  for (const Layout& l : binary_layouts()) {
    t.push_back(exact(
        std::string("logical_kernel_") + l.name,
        [l](Generator& g) {
          return Inputs{operand_buffer(g, l, 0, DType::Bool), operand_buffer(g, l, 1, DType::Bool)};
        },
        [l](const Inputs& x) {
          std::vector<Tensor> r;
          for (LogicalOp op : {LogicalOp::And, LogicalOp::Or, LogicalOp::Not}) {
            const Tensor out = empty(l.out, {.dtype = DType::Bool, .device = x[0].device()});
            logical_stub(out.device())(op, out, operand(x[0], l, 0), operand(x[1], l, 1));
            r.push_back(out);
          }
          return flat_cat(r);
        }));
  }
}

void add_where_layout_rows(std::vector<OpRow>& t) {
  // where: operands cond, a, b; a scalar side is read from device memory by every thread.
  const std::vector<Layout> where_layouts = {
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
  for (DType dt : kAll) {
    for (const Layout& l : where_layouts) {
      t.push_back(exact(
          std::string("where_kernel_") + dtype_name(dt) + "_" + l.name,
          [l, dt](Generator& g) {
            return Inputs{operand_buffer(g, l, 0, DType::Bool), operand_buffer(g, l, 1, dt),
                          operand_buffer(g, l, 2, dt)};
          },
          [l, dt](const Inputs& x) {
            const Tensor out = empty(l.out, {.dtype = dt, .device = x[0].device()});
            where_stub(out.device())(out, operand(x[0], l, 0), operand(x[1], l, 1), operand(x[2], l, 2));
            return raw_bits(out);
          }));
    }
    // where into its own operand, as masked_fill_ calls it (out = b, a = the broadcast fill
    // value); b contiguous and a transposed view.
    t.push_back(exact(
        std::string("where_kernel_into_its_operand_") + dtype_name(dt),
        [dt](Generator& g) {
          return Inputs{tricky(g, {9, 17}, dt), mask(g, {17, 9}), tricky(g, {1}, dt)};
        },
        [](const Inputs& x) {
          std::vector<Tensor> r;
          for (bool transposed : {false, true}) {
            const Tensor buf = x[0].detach().clone();
            const Tensor b = transposed ? buf.t() : buf.view({17, 9});
            where_stub(buf.device())(b, x[1], x[2].expand({17, 9}), b);
            r.push_back(raw_bits(buf));
          }
          return cat(r, 0);
        }));
  }
}

void add_isclose_rows(std::vector<OpRow>& t) {
  // isclose: b is a itself, a nudged by a relative or an absolute amount, or unrelated, element by
  // element; tolerances relative, absolute, both and none.
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Layout& l : binary_layouts()) {
      t.push_back(exact(
          std::string("isclose_kernel_") + dtype_name(dt) + "_" + l.name,
          [l, dt](Generator& g) {
            const Tensor a = operand_buffer(g, l, 0, dt);
            std::vector<double> v = operand(a, l, 0).contiguous().to(DType::Float64).to_vector<double>();
            const int64_t n = static_cast<int64_t>(v.size());
            const std::vector<double> other = tricky(g, {n}, DType::Float64).to_vector<double>();
            const std::vector<int64_t> pick = randint(0, 5, {n}, {.dtype = DType::Int64}, &g).to_vector<int64_t>();
            for (size_t i = 0; i < v.size(); ++i) {
              if (pick[i] == 1) v[i] *= 1.0 + 3e-6;
              if (pick[i] == 2) v[i] *= 1.0 + 3e-3;
              if (pick[i] == 3) v[i] += 2e-9;
              if (pick[i] == 4) v[i] = other[i];
            }
            return Inputs{a, from_vector<double>(v, l.out).to(dt)};
          },
          [l](const Inputs& x) {
            std::vector<Tensor> r;
            for (auto [rtol, atol] :
                 {std::pair{1e-5, 1e-8}, std::pair{0.0, 0.5}, std::pair{1e-2, 0.0}, std::pair{0.0, 0.0}}) {
              const Tensor out = empty(l.out, {.dtype = DType::Bool, .device = x[0].device()});
              isclose_stub(out.device())(out, operand(x[0], l, 0), x[1], rtol, atol);
              r.push_back(out);
            }
            return flat_cat(r);
          }));
    }
  }
}

}  // namespace

void add_compare_rows(std::vector<OpRow>& t) {
  add_comparison_layout_rows(t);
  add_where_layout_rows(t);
  add_isclose_rows(t);
}

}  // namespace ember::ops_test
