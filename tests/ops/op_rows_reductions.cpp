// Rows: every reduction through every layout the reduction kernels treat differently: reduced dims
// contiguous (rows of 1, 37 and 300), strided (columns, and few outputs), several dims at once,
// all dims, an empty reduced dim, and few long rows (the two-stage path: slices of each row, then
// their partials in order), in float32 and float64 and, for the ops that take them, int32, int64
// and uint8; max/min propagating NaN; argmax/argmin on data full of ties, with NaN
// (core/reduce_kernels.h); and, calling the kernels directly, what no op asks of them: a product
// and argmax/argmin (with and without values) over several dims at once (prod and argmax take
// one dim or all). These rows took over tests/emu's reduction checks.
#include <cmath>
#include <string>
#include <vector>

#include "core/reduce_kernels.h"
#include "op_table.h"
#include "oracle.h"

namespace ember::ops_test {
namespace {

struct Layout {
  const char* name;
  Shape shape;
  std::vector<int64_t> dims;  // the reduced dims
  bool ints;                  // also in the integer dtypes (which share the float kernels' layouts)
  bool long_rows = false;
};
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> v = {
      {"row_37", {3, 37}, {1}, true},
      {"row_300", {2, 300}, {1}, false},
      {"row_1", {5, 1}, {1}, false},
      {"column_70x40", {70, 40}, {0}, true},
      {"column_few_outputs", {9, 5}, {0}, true},
      {"two_dims", {4, 6, 5, 7}, {1, 3}, true},
      {"all", {3, 5, 11}, {0, 1, 2}, false},
      {"empty", {3, 0}, {1}, true},
      {"long_full", {12000}, {0}, true, true},
      {"long_rows", {3, 9001}, {1}, false, true},
      {"long_strided", {9001, 2}, {0}, false, true},            // reduced dim strided, too few outputs for columns
      {"long_two_dims", {2, 90, 3, 100}, {1, 3}, false, true},  // reduced dims that do not merge
  };
  return v;
}

Tensor sample(Generator& g, Shape s, DType dt) {
  if (is_floating(dt)) return add(mul(rand(std::move(s), {.dtype = DType::Float64}, &g), 4.0), -2.0).to(dt);
  return randint(dt == DType::UInt8 ? 0 : -5, 6, std::move(s), {.dtype = dt}, &g);
}

// Several reduced dims at once through the kernels: the input permuted so that the reduced dims
// come last, as the op layer hands it over.
struct Several {
  const char* name;
  Shape shape;
  std::vector<int64_t> perm;
  int64_t nred;
};
// The reduced dims of two_dims and long_two_dims do not merge; long_two_dims has rows long
// enough for a product's two stages (slices of each row, then their partials in order) and, in
// its smaller sibling for argmax/argmin (which have no second stage), several elements per thread.
const std::vector<Several> several = {
    {"two_dims", {4, 6, 5, 7}, {0, 2, 1, 3}, 2},
    {"all", {3, 5, 11}, {0, 1, 2}, 3},
    {"long_two_dims", {2, 90, 3, 100}, {0, 2, 1, 3}, 2},
};
const std::vector<Several> several_arg = {several[0], several[1], {"long_two_dims", {2, 20, 3, 30}, {0, 2, 1, 3}, 2}};
// The shape of v with its last nred (reduced) dims dropped.
Shape out_shape(const Tensor& v, int64_t nred) {
  return Shape(v.shape().begin(), v.shape().end() - nred);
}

}  // namespace

namespace {

// Every reduction over each layout, in every dtype it takes.
void add_single_dim_reduction_rows(std::vector<OpRow>& t) {
  using Reduce = std::function<Tensor(const Tensor&, const std::vector<int64_t>&)>;
  struct Op {
    const char* name;
    Reduce f;
    bool ints;
    bool on_empty;  // defined on an empty reduction
  };
  const std::vector<Op> ops = {
      {"sum", [](const Tensor& a, const std::vector<int64_t>& d) { return sum(a, d); }, true, true},
      {"mean", [](const Tensor& a, const std::vector<int64_t>& d) { return mean(a, d); }, false, true},
      {"prod",
       [](const Tensor& a, const std::vector<int64_t>& d) {
         Tensor r = a;  // prod takes one dim: the reduced dims one after another, last first
         for (auto it = d.rbegin(); it != d.rend(); ++it) r = prod(r, *it);
         return r;
       },
       true, true},
      {"amax", [](const Tensor& a, const std::vector<int64_t>& d) { return amax(a, d); }, true, false},
      {"amin", [](const Tensor& a, const std::vector<int64_t>& d) { return amin(a, d); }, true, false},
      {"norm_p1", [](const Tensor& a, const std::vector<int64_t>& d) { return norm(a, 1.0, d); }, false, false},
      {"norm_p2", [](const Tensor& a, const std::vector<int64_t>& d) { return norm(a, 2.0, d); }, false, false},
      {"norm_p3", [](const Tensor& a, const std::vector<int64_t>& d) { return norm(a, 3.0, d); }, false, false},
      {"norm_inf", [](const Tensor& a, const std::vector<int64_t>& d) { return norm(a, INFINITY, d); }, false, false},
      {"norm_p0_5", [](const Tensor& a, const std::vector<int64_t>& d) { return norm(a, 0.5, d); }, false, false},
      {"var", [](const Tensor& a, const std::vector<int64_t>& d) { return var(a, d); }, false, true},
      {"var_biased", [](const Tensor& a, const std::vector<int64_t>& d) { return var(a, d, false); }, false, true},
      {"std", [](const Tensor& a, const std::vector<int64_t>& d) { return ember::std(a, d); }, false, true},
  };
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    const bool fp = is_floating(dt);
    for (const Layout& l : layouts()) {
      if (!fp && !l.ints) continue;
      for (const Op& op : ops) {
        if (!fp && !op.ints) continue;
        const bool empty = numel_of(l.shape) == 0;
        if (empty && !op.on_empty) continue;
        // Long products overflow or underflow: not informative (prod's own rows have long rows).
        const std::string name(op.name);
        if (name == "prod" && (std::string(l.name) == "row_300" || l.long_rows)) continue;
        OpRow r{std::string("reduce_") + op.name + "_" + dtype_name(dt) + "_" + l.name,
                [dt, s = l.shape](Generator& g) { return Inputs{sample(g, s, dt)}; },
                [f = op.f, d = l.dims](const Inputs& x) { return f(x[0], d); }, fp ? 2e-4 : 0.0};
        r.gradcheck = false;  // the family's small rows check the derivatives
        // The long rows test the forward's two stages; the backward of each op is the short rows'.
        if (l.long_rows) r.grad = false, r.strided = false;
        // Gradients of max/min and norm_inf split among ties by convention; uniform data has none.
        t.push_back(std::move(r));
      }
    }
  }
}

void add_nan_and_arg_reduction_rows(std::vector<OpRow>& t) {
  // max and min propagate NaN (one in row 0, one at the end of row 2).
  for (bool is_max : {true, false}) {
    t.push_back({std::string("reduce_") + (is_max ? "amax" : "amin") + "_nan",
                 [](Generator& g) {
                   Tensor x = sample(g, {4, 50}, DType::Float32);
                   x.select(0, 0).narrow(0, 7, 1).fill_(NAN);
                   x.select(0, 2).narrow(0, 49, 1).fill_(NAN);
                   return Inputs{x};
                 },
                 [is_max](const Inputs& x) { return is_max ? amax(x[0], {1}) : amin(x[0], {1}); }, 0.0, false, false});
  }

  // argmax/argmin (and max/min with their indices) on few distinct values: ties everywhere, so
  // "the first extreme" matters; float32 also with a NaN. Every single-dim and the all-dims layout.
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::UInt8}) {
    for (const Layout& l : layouts()) {
      if (numel_of(l.shape) == 0 || (l.dims.size() > 1 && l.dims.size() != l.shape.size())) continue;
      const bool all = l.dims.size() == l.shape.size() && l.shape.size() > 1;
      for (bool is_max : {true, false}) {
        for (bool with_values : {true, false}) {
          if (all && with_values) continue;  // max(a) over all elements has no index
          OpRow r{std::string(is_max ? "argmax" : "argmin") + (with_values ? "_with_values_" : "_") + dtype_name(dt) +
                      "_" + l.name,
                  [dt, s = l.shape](Generator& g) {
                    Tensor x = randint(0, 4, s, {.dtype = dt}, &g);
                    if (dt == DType::Float32 && numel_of(s) > 40) x.reshape({-1}).narrow(0, 30, 1).fill_(NAN);
                    return Inputs{x};
                  },
                  [is_max, with_values, all, d = l.dims](const Inputs& x) {
                    if (all) return is_max ? argmax(x[0]) : argmin(x[0]);
                    auto [v, i] = is_max ? max(x[0], d[0]) : min(x[0], d[0]);
                    return with_values
                               ? cat({v.to(DType::Float64).reshape({-1}), i.to(DType::Float64).reshape({-1})}, 0)
                               : (is_max ? argmax(x[0], d[0]) : argmin(x[0], d[0]));
                  },
                  0.0,
                  false,
                  false};
          if (l.long_rows) r.strided = false;
          t.push_back(std::move(r));
        }
      }
    }
  }
}

// Several reduced dims at once (the cases in several, above), every dtype.
void add_several_dim_reduction_rows(std::vector<OpRow>& t) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    for (const Several& c : several) {
      if (!is_floating(dt) && std::string(c.name) == "long_two_dims") continue;  // integer products of 9000 wrap
      OpRow r{std::string("reduce_kernel_prod_") + dtype_name(dt) + "_" + c.name,
              [dt, c](Generator& g) {
                // Products stay finite: factors in [0.9, 1.1], or -1 and 1, or 1 and 2 (uint8 wraps,
                // as on the CPU).
                if (is_floating(dt))
                  return Inputs{add(mul(rand(c.shape, {.dtype = DType::Float64}, &g), 0.2), 0.9).to(dt)};
                if (dt == DType::UInt8) return Inputs{randint(1, 3, c.shape, {.dtype = dt}, &g)};
                return Inputs{add(mul(randint(0, 2, c.shape, {.dtype = dt}, &g), 2.0), -1.0).to(dt)};
              },
              [c](const Inputs& x) {
                const Tensor v = x[0].detach().permute(c.perm);
                const Tensor out =
                    empty(out_shape(v, c.nred),
                          {.dtype = is_floating(v.dtype()) ? v.dtype() : DType::Int64, .device = v.device()});
                reduce_stub(v.device())(ReduceOp::Prod, out, v, c.nred, 0);
                return out;
              }};
      r.grad = r.gradcheck = r.strided = false;
      // A product of n rounded factors is within n units of rounding of the exact one, relative to
      // itself whatever the order (no cancellation, so no absolute part): n * 2^-24 in float32, up
      // to 5e-4 for the 9,000 factors of long_two_dims; the integers wrap as unsigned 64-bit
      // products do, in any order.
      int64_t n = 1;
      for (size_t k = c.shape.size() - static_cast<size_t>(c.nred); k < c.shape.size(); ++k)
        n *= c.shape[static_cast<size_t>(c.perm[k])];
      r.tol = dt == DType::Float32   ? std::ldexp(static_cast<double>(n), -24)
              : dt == DType::Float64 ? std::ldexp(static_cast<double>(n), -53)
                                     : 0.0;
      r.atol = 0.0;
      r.oracle = [c, n](const Inputs& x) {
        const Tensor v = x[0].permute(c.perm);
        const Shape os = out_shape(v, c.nred);
        const size_t m = static_cast<size_t>(numel_of(os));
        if (is_floating(v.dtype())) {
          const std::vector<double> e = element_values(v);
          std::vector<double> p(m);
          for (size_t i = 0; i < m; ++i) {
            long double acc = 1.0L;
            for (size_t j = 0; j < static_cast<size_t>(n); ++j) acc *= e[i * static_cast<size_t>(n) + j];
            p[i] = static_cast<double>(acc);
          }
          return from_vector<double>(p, os);
        }
        const std::vector<int64_t> e = element_ints(v);
        std::vector<int64_t> p(m);
        for (size_t i = 0; i < m; ++i) {
          uint64_t acc = 1;
          for (size_t j = 0; j < static_cast<size_t>(n); ++j)
            acc *= static_cast<uint64_t>(e[i * static_cast<size_t>(n) + j]);
          p[i] = static_cast<int64_t>(acc);
        }
        return from_vector<int64_t>(p, os);
      };
      t.push_back(std::move(r));
    }
  }
}

void add_several_dim_arg_reduction_rows(std::vector<OpRow>& t) {
  // Few distinct values: ties everywhere, so "the first extreme" matters; float32 also with a NaN.
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::UInt8}) {
    for (const Several& c : several_arg) {
      for (ArgReduceOp op : {ArgReduceOp::Max, ArgReduceOp::Min}) {
        OpRow r{std::string(op == ArgReduceOp::Max ? "arg_reduce_kernel_max_" : "arg_reduce_kernel_min_") +
                    dtype_name(dt) + "_" + c.name,
                [dt, c](Generator& g) {
                  Tensor x = randint(0, 4, c.shape, {.dtype = dt}, &g);
                  if (dt == DType::Float32) x.reshape({-1}).narrow(0, 30, 1).fill_(NAN);
                  return Inputs{x};
                },
                [c, op](const Inputs& x) {
                  const Tensor v = x[0].detach().permute(c.perm);
                  const Shape os = out_shape(v, c.nred);
                  // With the values, and the indices alone (values undefined).
                  const TensorOptions o{.dtype = DType::Int64, .device = v.device()};
                  const Tensor i1 = empty(os, o), i2 = empty(os, o), values = empty(os, v.options());
                  arg_reduce_stub(v.device())(op, values, i1, v, c.nred);
                  arg_reduce_stub(v.device())(op, Tensor(), i2, v, c.nred);
                  return cat({values.to(DType::Float64).reshape({-1}), i1.to(DType::Float64).reshape({-1}),
                              i2.to(DType::Float64).reshape({-1})},
                             0);
                },
                0.0};
        r.grad = r.gradcheck = r.strided = false;
        // The first extreme of each reduced row (the first NaN where there is one), its value and
        // its index twice, found by a plain scan.
        r.oracle = [c, op](const Inputs& x) {
          const Tensor v = x[0].permute(c.perm);
          const size_t m = static_cast<size_t>(numel_of(out_shape(v, c.nred)));
          const std::vector<double> e = element_values(v);
          const size_t n = e.size() / m;
          std::vector<double> values(m), index(m);
          for (size_t i = 0; i < m; ++i) {
            size_t best = 0;
            for (size_t j = 0; j < n && !std::isnan(e[i * n + best]); ++j) {
              const double a = e[i * n + j], b = e[i * n + best];
              if (std::isnan(a) || (op == ArgReduceOp::Max ? a > b : a < b)) best = j;
            }
            values[i] = e[i * n + best];
            index[i] = static_cast<double>(best);
          }
          std::vector<double> all = values;
          all.insert(all.end(), index.begin(), index.end());
          all.insert(all.end(), index.begin(), index.end());
          return from_vector<double>(all, {static_cast<int64_t>(all.size())});
        };
        t.push_back(std::move(r));
      }
    }
  }
}

}  // namespace

void add_reduction_rows(std::vector<OpRow>& t) {
  add_single_dim_reduction_rows(t);
  add_nan_and_arg_reduction_rows(t);
  add_several_dim_reduction_rows(t);
  add_several_dim_arg_reduction_rows(t);
}

}  // namespace ember::ops_test
