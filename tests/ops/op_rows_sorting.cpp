// Rows: sort and topk in every dtype along every dim, on data full of ties and, for the floating
// dtypes, NaN, infinities and -0; k = 1, k = n and in between, largest and smallest; rows that
// fit the shared-memory bitonic sort (short ones several to a block) and rows longer than it
// (chunks, then merge passes); strided inputs (core/reduce_kernels.h). The indices are compared
// exactly, so the values are the input's bits in the CPU's order. These rows took over tests/emu's
// sort checks.
#include <cmath>
#include <string>
#include <vector>

#include "op_table.h"

namespace ember::ops_test {
namespace {

// Few distinct values (many ties) and, for floating dtypes, NaN, +-inf and -0 among them.
Tensor tied_values(Generator& g, const Shape& s, DType dt, int salt) {
  const bool fp = is_floating(dt);
  const int64_t lo = (dt == DType::Bool || dt == DType::UInt8) ? 0 : -3, hi = dt == DType::Bool ? 2 : 4;
  std::vector<double> v = randint(lo, hi, s, {.dtype = DType::Float64}, &g).to_vector<double>();
  if (fp) {
    const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 0.5};
    for (size_t i = 0; i < v.size(); i += 5) v[i] = specials[(i / 5 + static_cast<size_t>(salt)) % 6];
  }
  return from_vector<double>(v, s).to(dt);
}

// Values and indices of sort (k < 0) or topk, in one float64 tensor.
Tensor sorted(const Tensor& a, int64_t dim, int64_t k, bool largest) {
  auto [v, i] = k < 0 ? sort(a, dim, largest) : topk(a, k, dim, largest);
  return cat({v.to(DType::Float64).reshape({-1}), i.to(DType::Float64).reshape({-1})}, 0);
}

std::string tag(DType dt, int64_t dim, int64_t k, bool largest) {
  return std::string(dtype_name(dt)) + "_dim" + std::to_string(dim) + (k < 0 ? "" : "_k" + std::to_string(k)) +
         (largest ? "_largest" : "_smallest");
}

}  // namespace

namespace {

// Rows within one block's shared-memory sort, k = 1, and strided views.
void add_short_row_sort_rows(std::vector<OpRow>& t) {
  const std::vector<DType> all = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                                  DType::Int32,   DType::Int64,   DType::UInt8,   DType::Bool};
  // Rows of 5 (dim 0: 64 rows per block), 37 (dim 1: 8 per block) and 3 (dim 2), the first two
  // with neighbouring rows adjacent in memory.
  const Shape s = {5, 37, 3};
  for (DType dt : all) {
    for (int64_t dim : {0, 1, 2}) {
      for (bool largest : {false, true}) {
        for (int64_t k : {int64_t{-1}, s[static_cast<size_t>(dim)] / 2 + 1}) {
          t.push_back({std::string(k < 0 ? "sort_" : "topk_") + tag(dt, dim, k, largest),
                       [dt, s](Generator& g) { return Inputs{tied_values(g, s, dt, 11)}; },
                       [dim, k, largest](const Inputs& x) { return sorted(x[0], dim, k, largest); }, 0.0, false,
                       false});
        }
      }
    }
  }
  // k = 1, and rows of one element.
  for (DType dt : {DType::Float32, DType::Int64}) {
    for (bool largest : {false, true}) {
      for (int64_t dim : {0, 1})
        t.push_back({"topk_top1_" + tag(dt, dim, 1, largest),
                     [dt](Generator& g) {
                       return Inputs{tied_values(g, {6, 29}, dt, 3)};
                     },
                     [dim, largest](const Inputs& x) { return sorted(x[0], dim, 1, largest); }, 0.0, false, false});
    }
    t.push_back({std::string("topk_rows_of_one_") + dtype_name(dt),
                 [dt](Generator& g) {
                   return Inputs{tied_values(g, {4, 1, 7}, dt, 5)};
                 },
                 [](const Inputs& x) { return sorted(x[0], 1, 1, true); }, 0.0, false, false});
  }
  // Strided: transposed, narrowed, and ten dims reversed (nine scattered row dims, more than the
  // kernel's row layout holds, so it sorts a contiguous copy).
  t.push_back({"sort_transposed_views",
               [](Generator& g) {
                 return Inputs{tied_values(g, {7, 4, 33}, DType::Float32, 8)};
               },
               [](const Inputs& x) {
                 const Tensor v = x[0].transpose(0, 2);
                 const Tensor n = x[0].narrow(2, 3, 20);
                 return cat(
                     {sorted(v, 0, -1, true), sorted(v, 2, -1, false), sorted(n, 2, 9, false), sorted(n, 1, 4, true)},
                     0);
               },
               0.0, false, false});
  t.push_back({"topk_ten_dims_reversed",
               [](Generator& g) {
                 return Inputs{tied_values(g, {3, 2, 2, 2, 2, 2, 2, 2, 2, 2}, DType::Float32, 12)};
               },
               [](const Inputs& x) {
                 return sorted(x[0].permute({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}), 9, 3, true);
               },
               0.0, false, false});
}

void add_long_row_sort_rows(std::vector<OpRow>& t) {
  // Rows longer than the shared-memory sort takes (4096 entries with 32-bit keys, 2048 with 64-bit
  // ones): chunks, then merge passes, including a last chunk and a last run without a partner.
  struct Long {
    DType dt;
    Shape shape;
    int64_t dim, k;
    bool largest;
  };
  for (const Long& c : {Long{DType::Float32, {2, 9000}, 1, -1, false}, Long{DType::Float32, {2, 9000}, 1, 5000, true},
                        Long{DType::Float32, {9000, 2}, 0, 700, true}, Long{DType::Float16, {1, 8200}, 1, 1, false},
                        Long{DType::Float64, {2, 4500}, 1, -1, true}, Long{DType::Float64, {2, 4500}, 1, 2100, false},
                        Long{DType::Int64, {1, 2049}, 1, -1, false}}) {
    t.push_back({std::string(c.k < 0 ? "sort_long_" : "topk_long_") + tag(c.dt, c.dim, c.k, c.largest) + "_" +
                     std::to_string(c.shape[static_cast<size_t>(c.dim)]),
                 [c](Generator& g) { return Inputs{tied_values(g, c.shape, c.dt, 21)}; },
                 [c](const Inputs& x) { return sorted(x[0], c.dim, c.k, c.largest); }, 0.0, false, false, false});
  }
  // Distinct values draw the first k from every chunk, so every merge pass decides some of them.
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t k : {int64_t{700}, int64_t{3000}}) {
      for (bool largest : {false, true}) {
        t.push_back({"topk_long_distinct_" + tag(dt, 1, k, largest),
                     [dt](Generator& g) {
                       return Inputs{randn({2, 9000}, {.dtype = dt}, &g)};
                     },
                     [k, largest](const Inputs& x) { return sorted(x[0], 1, k, largest); }, 0.0, false, false, false});
      }
    }
  }
}

}  // namespace

void add_sorting_rows(std::vector<OpRow>& t) {
  add_short_row_sort_rows(t);
  add_long_row_sort_rows(t);
}

}  // namespace ember::ops_test
