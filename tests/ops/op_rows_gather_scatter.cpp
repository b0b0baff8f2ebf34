// Rows: the index kernels with the arguments the op layer never gives them (core/index_kernels.h,
// called directly on the backend's device): index_range at one and several blocks with the int64
// extremes; gather in every dtype along every dim from strided sources through strided indices
// smaller than the source; scatter and scatter_add with src larger than the index, strided, with
// many repeated indices on both of the kernel's paths (by fiber and by group; which one a case
// takes is counted in tests/emu/scatter_paths_emu_test.cpp, which also holds 16384 long fibers,
// too many elements for the table), from a broadcast zero and with an empty index; index_add with repeated indices in
// float32, float64 and int64; one_hot, and tril/triu in every dtype on strided batches at diagonals inside and outside
// the matrix. Every result equals the CPU's exactly: the kernels only move values, and where they add, they add in the
// CPU's order (repeats in index order). These rows took over tests/emu's gather, scatter, index_add, one_hot and trilu
// checks.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/index_kernels.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

const std::vector<DType> kAll = {DType::Float32, DType::Float64, DType::Int32,   DType::Int64,
                                 DType::UInt8,   DType::Bool,    DType::Float16, DType::BFloat16};
const std::vector<DType> kNumeric = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8};

// Values every dtype holds exactly (floats get a fractional part; bool gets both values).
Tensor sample(Generator& g, Shape s, DType dt) {
  if (dt == DType::Bool) return randint(0, 2, std::move(s), {.dtype = DType::Float64}, &g).to(dt);
  if (is_floating(dt)) return randn(std::move(s), {.dtype = DType::Float64}, &g).to(dt);
  return randint(0, 120, std::move(s), {.dtype = dt}, &g);
}

// Exact, in the row's own dtypes, never strided by the harness (the rows lay out their operands).
OpRow exact(std::string name, std::function<Inputs(Generator&)> inputs, std::function<Tensor(const Inputs&)> f) {
  OpRow r{std::move(name), std::move(inputs), std::move(f), 0.0, false, false, false};
  r.cross_reference = true;
  return r;
}

// An int64 as two 32-bit halves, exact in the table's double comparison.
void push_halves(std::vector<double>& v, int64_t x) {
  v.push_back(static_cast<double>(x >> 32));
  v.push_back(static_cast<double>(x & 0xffffffff));
}

struct ScatterCase {
  const char* name;
  Shape out, index, src;
  int64_t dim;
  bool strided = false;  // index and src are transposed views (2-D cases)
};
// The path each case takes is asserted in tests/emu/scatter_paths_emu_test.cpp.
const std::vector<ScatterCase>& scatter_cases() {
  static const std::vector<ScatterCase> v = {
      // Short fibers (len 3) with a src larger than the index, in every dim of a 3-D out: by fiber.
      {"short_fibers_dim0", {6, 8, 5}, {3, 7, 4}, {4, 9, 5}, 0},
      {"short_fibers_dim1", {6, 8, 5}, {5, 3, 4}, {6, 4, 6}, 1},
      {"short_fibers_dim2", {6, 8, 5}, {5, 7, 3}, {7, 8, 4}, 2},
      // Few long fibers with about 8 repeats of every index: by group, along either dim.
      {"long_fibers_dim1", {3, 40}, {2, 300}, {3, 301}, 1},
      {"long_fibers_dim0_strided", {50, 3}, {400, 2}, {401, 3}, 0, true},
      {"1d", {37}, {1000}, {1000}, 0},
      // Few indices into a long out: by fiber (the group keys would outnumber the positions).
      {"sparse_1d", {1000}, {40}, {45}, 0},
  };
  return v;
}

std::string dims_name(const Shape& s) {
  std::string r;
  for (int64_t d : s) r += (r.empty() ? "" : "x") + std::to_string(d);
  return r;
}

// Stored transposed when `strided`, so that the row's view of it is a transposed one.
Tensor stored(const Tensor& t, bool strided) {
  return strided ? t.t().contiguous() : t;
}
Tensor viewed(const Tensor& t, bool strided) {
  return strided ? t.t() : t;
}

}  // namespace

namespace {

void add_index_range_and_gather_rows(std::vector<OpRow>& t) {
  // index_range: one block, one full block plus a tail, ten blocks (two passes); the int64
  // extremes at the end and in the middle, where a missed element shows; all equal; one negative.
  for (int64_t n : {1, 300, 2049, 20000}) {
    t.push_back(exact(
        "index_range_n" + std::to_string(n),
        [n](Generator& g) {
          Tensor idx = ints(g, -1000000, 1000000, {n});
          if (n > 2) {
            idx.data_ptr<int64_t>()[n - 1] = std::numeric_limits<int64_t>::max();
            idx.data_ptr<int64_t>()[n / 2] = std::numeric_limits<int64_t>::min();
          }
          return Inputs{idx, full({777}, 5, {.dtype = DType::Int64}), full({1}, -3, {.dtype = DType::Int64})};
        },
        [](const Inputs& x) {
          std::vector<double> v;
          for (const Tensor& idx : x) {
            int64_t lo = 0, hi = 0;
            index_range_stub(idx.device())(idx, &lo, &hi);
            push_halves(v, lo);
            push_halves(v, hi);
          }
          return from_vector<double>(v, {static_cast<int64_t>(v.size())});
        }));
  }

  // gather from src [5, 7, 6], contiguous and as a permuted, narrowed view of a larger tensor; the
  // index smaller than src in the other dims, longer along dim, and transposed for the view.
  for (DType dt : kAll) {
    for (int64_t dim : {0, 1, 2}) {
      t.push_back(exact(
          std::string("gather_kernel_") + dtype_name(dt) + "_dim" + std::to_string(dim),
          [dt, dim](Generator& g) {
            Shape is = {4, 6, 5};
            is[static_cast<size_t>(dim)] = 9;
            const int64_t size = Shape{5, 7, 6}[static_cast<size_t>(dim)];
            return Inputs{sample(g, {5, 7, 6}, dt), sample(g, {8, 6, 5}, dt), ints(g, 0, size, is),
                          ints(g, 0, size, is).transpose(0, 2).contiguous()};
          },
          [dt, dim](const Inputs& x) {
            const Tensor strided_src = x[1].narrow(0, 1, 7).permute({2, 0, 1});
            const Tensor strided_idx = x[3].transpose(0, 2);
            const Tensor a = empty(x[2].shape(), {.dtype = dt, .device = x[0].device()});
            const Tensor b = empty(strided_idx.shape(), {.dtype = dt, .device = x[0].device()});
            gather_stub(a.device())(a, x[0], dim, x[2]);
            gather_stub(b.device())(b, strided_src, dim, strided_idx);
            return cat({a.reshape({-1}), b.reshape({-1})}, 0);
          }));
    }
  }
  t.push_back(exact(
      "gather_kernel_one_element_and_empty_index",
      [](Generator& g) {
        return Inputs{rn(g, {1}), zeros({1}, {.dtype = DType::Int64}), rn(g, {2, 3}),
                      zeros({0, 3}, {.dtype = DType::Int64})};
      },
      [](const Inputs& x) {
        const Tensor one = empty({1}, x[0].options()), none = empty({0, 3}, x[0].options());
        gather_stub(one.device())(one, x[0], 0, x[1]);
        gather_stub(none.device())(none, x[2], 0, x[3]);
        return cat({one, none.reshape({-1})}, 0);
      }));
}

void add_scatter_and_index_add_rows(std::vector<OpRow>& t) {
  // scatter (the last write wins, in every dtype) and scatter_add (repeats summed in index order,
  // in the dtypes it adds): the CPU's writes and additions in the CPU's order.
  for (bool accumulate : {false, true}) {
    for (DType dt : accumulate ? kNumeric : kAll) {
      for (const ScatterCase& c : scatter_cases()) {
        t.push_back(exact(
            std::string(accumulate ? "scatter_add_kernel_" : "scatter_kernel_") + dtype_name(dt) + "_" + c.name,
            [c, dt](Generator& g) {
              const int64_t size = c.out[static_cast<size_t>(c.dim)];
              return Inputs{sample(g, c.out, dt), stored(ints(g, 0, size, c.index), c.strided),
                            stored(sample(g, c.src, dt), c.strided)};
            },
            [c, accumulate](const Inputs& x) {
              const Tensor out = x[0].detach().clone();
              scatter_stub(out.device())(out, c.dim, viewed(x[1], c.strided), viewed(x[2], c.strided), accumulate);
              return out;
            }));
      }
    }
  }
  // scatter's backward zeroes the overwritten positions with an expanded (stride 0) zero; an
  // empty index changes nothing.
  t.push_back(exact(
      "scatter_kernel_broadcast_zero_and_empty_index",
      [](Generator& g) {
        return Inputs{rn(g, {4, 30}), ints(g, 0, 30, {4, 25}), zeros({4, 0}, {.dtype = DType::Int64})};
      },
      [](const Inputs& x) {
        const Tensor z = zeros({1}, x[0].options()).expand({4, 25});
        const Tensor a = x[0].detach().clone(), b = x[0].detach().clone();
        scatter_stub(a.device())(a, 1, x[1], z, false);
        scatter_stub(b.device())(b, 1, x[2], z, true);
        return cat({a, b}, 0);
      }));

  // index_add (index_select's and the embedding's backward) with many repeats (the groups), more
  // positions than a block, and int64, which no op's backward reaches.
  struct IndexAddCase {
    const char* name;
    Shape out;
    int64_t dim, m, distinct;
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
    for (const IndexAddCase& c :
         {IndexAddCase{"7x6_300_repeats_of_5", {7, 6}, 0, 300, 5}, IndexAddCase{"50x3_40_of_50", {50, 3}, 0, 40, 50},
          IndexAddCase{"3x11x2_dim1_600_of_11", {3, 11, 2}, 1, 600, 11}}) {
      t.push_back(exact(
          std::string("index_add_kernel_") + dtype_name(dt) + "_" + c.name,
          [c, dt](Generator& g) {
            Shape ss = c.out;
            ss[static_cast<size_t>(c.dim)] = c.m;
            auto values = [&](Shape s) {
              return is_floating(dt) ? randn(std::move(s), {.dtype = dt}, &g)
                                     : randint(-9, 10, std::move(s), {.dtype = dt}, &g);
            };
            return Inputs{values(c.out), ints(g, 0, c.distinct, {c.m}), values(ss)};
          },
          [c](const Inputs& x) {
            const Tensor out = x[0].detach().clone();
            index_add_stub(out.device())(out, c.dim, x[1], x[2]);
            return out;
          }));
    }
  }
}

void add_one_hot_and_triangle_rows(std::vector<OpRow>& t) {
  // one_hot of labels of one element, of an odd count, of a batch and of more than a block, into
  // one class, a few and more than a warp of them.
  for (const Shape& s : std::vector<Shape>{{1}, {37}, {3, 7}, {300}}) {
    t.push_back(exact(
        "one_hot_labels_" + dims_name(s),
        [s](Generator& g) {
          return Inputs{ints(g, 0, 1, s), ints(g, 0, 5, s), ints(g, 0, 129, s)};
        },
        [](const Inputs& x) {
          return cat({one_hot(x[0], 1).reshape({-1}), one_hot(x[1], 5).reshape({-1}), one_hot(x[2], 129).reshape({-1})},
                     0);
        }));
  }

  // tril/triu of a matrix, a batch, transposed matrices and a permuted batch, at every diagonal
  // from far below to far above the matrix.
  struct Layout {
    const char* name;
    Shape stored;
    std::vector<int64_t> perm;  // the view of the stored tensor that is trilu'd
  };
  for (DType dt : kAll) {
    for (const Layout& l : {Layout{"5x7", {5, 7}, {0, 1}}, Layout{"batched_3x6x4", {3, 6, 4}, {0, 1, 2}},
                            Layout{"transposed_matrices", {2, 3, 9, 8}, {0, 1, 3, 2}},
                            Layout{"permuted_batch", {4, 2, 5, 3}, {1, 0, 3, 2}}}) {
      t.push_back(exact(
          std::string("trilu_") + dtype_name(dt) + "_" + l.name,
          [l, dt](Generator& g) { return Inputs{sample(g, l.stored, dt)}; },
          [l](const Inputs& x) {
            const Tensor a = x[0].permute(l.perm);
            std::vector<Tensor> r;
            for (int64_t diagonal : {-20, -2, -1, 0, 1, 3, 20}) {
              r.push_back(tril(a, diagonal).reshape({-1}));
              r.push_back(triu(a, diagonal).reshape({-1}));
            }
            return cat(r, 0);
          }));
    }
  }
}

}  // namespace

void add_gather_scatter_rows(std::vector<OpRow>& t) {
  add_index_range_and_gather_rows(t);
  add_scatter_and_index_add_rows(t);
  add_one_hot_and_triangle_rows(t);
}

}  // namespace ember::ops_test
