// Rows: reductions and their backward kernels, arg-reductions, softmax and logsumexp, norms,
// sort and topk (core/reduce_kernels.h).
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"
#include "test_helpers.h"

namespace ember::ops_test {
namespace {

Tensor tied(Generator& g, Shape s) {  // integer-valued floats: many exact ties
  return randint(-3, 4, std::move(s), {.dtype = DType::Float32}, &g);
}
Tensor near_one(Generator& g, Shape s) {  // long products stay finite
  return add(mul(rand(std::move(s), {}, &g), 0.2), 0.9);
}

// ---- the reductions composed from other kernels (a GEMM with a ones vector, sort, elementwise
// ops), the oracle of the *_vs_composed rows below

// The reduced dims of `a` (all when `dims` is empty; negative ones wrapped) moved last and merged:
// a [kept elements, R] matrix, and the result's shape.
struct ByRows {
  Tensor rows;
  Shape out;
  int64_t R = 1;
};
ByRows by_rows(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  const int64_t nd = a.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) red[static_cast<size_t>(d < 0 ? d + nd : d)] = true;
  std::vector<int64_t> perm;
  Shape kept;
  ByRows r;
  for (int64_t d = 0; d < nd; ++d)
    if (!red[static_cast<size_t>(d)]) perm.push_back(d), kept.push_back(a.size(d));
  for (int64_t d = 0; d < nd; ++d)
    if (red[static_cast<size_t>(d)]) perm.push_back(d), r.R *= a.size(d);
  for (int64_t d = 0; d < nd; ++d)
    if (!red[static_cast<size_t>(d)])
      r.out.push_back(a.size(d));
    else if (keepdim)
      r.out.push_back(1);
  r.rows = a.permute(perm).reshape({numel_of(kept), r.R});
  return r;
}
Tensor sum_composed(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  const ByRows r = by_rows(a, std::move(dims), keepdim);
  return matmul(r.rows, ones({r.R}, a.options())).reshape(r.out);
}
Tensor mean_composed(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  const int64_t R = by_rows(a, dims, keepdim).R;
  return div(sum_composed(a, std::move(dims), keepdim), static_cast<double>(R));
}
Tensor var_composed(const Tensor& a, const std::vector<int64_t>& dims, bool unbiased, bool keepdim) {
  const int64_t R = by_rows(a, dims, keepdim).R;
  const Tensor centred = sub(a, mean_composed(a, dims, true));
  return div(sum_composed(square(centred), dims, keepdim), static_cast<double>(R - (unbiased ? 1 : 0)));
}
// The first entry of each row sorted descending (largest) or ascending.
Tensor extreme_composed(const Tensor& a, std::vector<int64_t> dims, bool keepdim, bool largest) {
  const ByRows r = by_rows(a, std::move(dims), keepdim);
  return sort(r.rows, 1, largest).first.select(1, 0).reshape(r.out);
}
Tensor logsumexp_composed(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim) {
  const Tensor m = extreme_composed(a.detach(), dims, true, true);
  return add(log(sum_composed(exp(sub(a, m)), dims, true)), m).reshape(by_rows(a, dims, keepdim).out);
}
Tensor norm_composed(const Tensor& a, double p, const std::vector<int64_t>& dims, bool keepdim) {
  if (std::isinf(p)) return extreme_composed(abs(a), dims, keepdim, true);
  return pow(sum_composed(pow(abs(a), p), dims, keepdim), 1.0 / p);
}
Tensor prod_composed(const Tensor& a, int64_t d, bool keepdim) {
  Tensor r = a.select(d, 0);
  for (int64_t i = 1; i < a.size(d); ++i) r = mul(r, a.select(d, i));
  return keepdim ? r.unsqueeze(d < 0 ? d + a.dim() : d) : r;
}
// The index of the first largest (smallest) entry along d: the first of a stable sort.
Tensor arg_composed(const Tensor& a, int64_t d, bool keepdim, bool largest) {
  const Tensor i = sort(a, d, largest).second.select(d, 0);
  return keepdim ? i.unsqueeze(d < 0 ? d + a.dim() : d) : i;
}
// max over dim 0 as a tree of elementwise maxima (no reduction kernel).
Tensor max_fold_dim0(Tensor x) {
  while (x.size(0) > 1) {
    const int64_t h = x.size(0) / 2;
    Tensor m = maximum(x.narrow(0, 0, h), x.narrow(0, h, h));
    x = x.size(0) % 2 ? cat({m, x.narrow(0, 2 * h, 1)}) : m;
  }
  return x.select(0, 0);
}

Tensor flat(const Tensor& t) {
  return t.reshape({-1});
}

// Runs a row with 4 threads, so the reductions' split paths run whatever the machine's core count.
struct FourThreads : test_util::ScopedThreads {
  FourThreads() : ScopedThreads(4) {}
};

// Every dim set of a 3-D tensor worth checking, with negative spellings.
const std::vector<std::vector<int64_t>>& dim_sets() {
  static const std::vector<std::vector<int64_t>> v = {{}, {0}, {1}, {2}, {-1}, {0, 1}, {0, 2}, {1, -1}, {2, 0, 1}};
  return v;
}

using Reduction3 = std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)>;

// The compositions run on the CPU copy of the input (tests/ops/composed.h).
Tensor H(const Tensor& a) {
  return a.to(Device::cpu());
}

// The op over every dim set, keepdim or not, each checked against the composition, flattened into
// one tensor.
Tensor over_dim_sets(const Inputs& x, const Tensor& a, const Reduction3& op, const Reduction3& composed, double tol) {
  std::vector<Tensor> parts;
  for (const auto& dims : dim_sets())
    for (bool keepdim : {false, true})
      parts.push_back(flat(checked(op(a, dims, keepdim), composed(H(a), dims, keepdim), x, tol)));
  return cat(parts);
}

// A row's inputs: one normal tensor of dtype `dt` and shape `s`, scaled by `scale`.
auto rn_dt(DType dt, Shape s, double scale = 1.0) {
  return [dt, s, scale](Generator& g) { return Inputs{mul(randn(s, {.dtype = dt}, &g), scale)}; };
}

// The tolerance of the composed rows: float32 sums in another order differ by more than float64's.
double tol_of(DType dt) {
  return dt == DType::Float64 ? 1e-9 : 2e-4;
}

constexpr DType f64 = DType::Float64;

// Each reduction over every dim set against its composition.
void add_every_dim_set_rows(std::vector<OpRow>& t) {
  auto every_dim_set = [&](const std::string& name, DType dt, Reduction3 op, Reduction3 composed) {
    t.push_back(
        {name + "_vs_composed_every_dim_set_" + dtype_name(dt), rn_dt(dt, {3, 4, 5}),
         [op, composed, tol = tol_of(dt)](const Inputs& x) { return over_dim_sets(x, x[0], op, composed, tol); },
         tol_of(dt)});
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    every_dim_set(
        "sum", dt, [](const Tensor& a, const std::vector<int64_t>& d, bool k) { return sum(a, d, k); }, sum_composed);
    every_dim_set(
        "logsumexp", dt, [](const Tensor& a, const std::vector<int64_t>& d, bool k) { return logsumexp(a, d, k); },
        logsumexp_composed);
  }
  every_dim_set(
      "mean", f64, [](const Tensor& a, const std::vector<int64_t>& d, bool k) { return mean(a, d, k); }, mean_composed);
  for (bool unbiased : {true, false}) {
    const std::string tag = unbiased ? "" : "_biased";
    every_dim_set(
        "var" + tag, f64,
        [unbiased](const Tensor& a, const std::vector<int64_t>& d, bool k) { return var(a, d, unbiased, k); },
        [unbiased](const Tensor& a, const std::vector<int64_t>& d, bool k) { return var_composed(a, d, unbiased, k); });
    every_dim_set(
        "std" + tag, f64,
        [unbiased](const Tensor& a, const std::vector<int64_t>& d, bool k) { return ember::std(a, d, unbiased, k); },
        [unbiased](const Tensor& a, const std::vector<int64_t>& d, bool k) {
          return sqrt(var_composed(a, d, unbiased, k));
        });
  }
  for (bool largest : {true, false})
    every_dim_set(
        largest ? "amax" : "amin", f64,
        [largest](const Tensor& a, const std::vector<int64_t>& d, bool k) {
          return largest ? amax(a, d, k) : amin(a, d, k);
        },
        [largest](const Tensor& a, const std::vector<int64_t>& d, bool k) {
          return extreme_composed(a, d, k, largest);
        });
  for (double p : {1.0, 2.0, 3.0, 0.5, 1.5, static_cast<double>(INFINITY)}) {
    std::string tag = std::isinf(p) ? "inf" : std::to_string(p);
    tag = tag.substr(0, tag.find_last_not_of('0') + 1);
    for (char& ch : tag)
      if (ch == '.') ch = '_';
    if (!tag.empty() && tag.back() == '_') tag.pop_back();
    every_dim_set(
        "norm_p" + tag, f64, [p](const Tensor& a, const std::vector<int64_t>& d, bool k) { return norm(a, p, d, k); },
        [p](const Tensor& a, const std::vector<int64_t>& d, bool k) { return norm_composed(a, p, d, k); });
  }
}

void add_view_sum_and_prod_rows(std::vector<OpRow>& t) {
  // Sums of views: transposed, permuted, every other row, a broadcast (stride 0) dim, every third
  // column.
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> views = {
      {"transposed", [](const Tensor& b) { return b.transpose(0, 2); }},
      {"permuted",
       [](const Tensor& b) {
         return b.permute({1, 2, 0});
       }},
      {"stepped_slice", [](const Tensor& b) { return b.slice(1, 1, 7, 2); }},
      {"expanded",
       [](const Tensor& b) {
         return b.select(2, 1).unsqueeze(1).expand({6, 5, 8});
       }},
      {"every_third", [](const Tensor& b) { return b.slice(2, 0, 4, 3); }},
  };
  for (const auto& [name, view] : views)
    t.push_back({"sum_vs_composed_every_dim_set_of_" + name + "_view", rn_dt(f64, {6, 8, 4}),
                 [view = view](const Inputs& x) {
                   return over_dim_sets(
                       x, view(x[0]),
                       [](const Tensor& a, const std::vector<int64_t>& d, bool k) { return sum(a, d, k); },
                       sum_composed, 1e-9);
                 },
                 1e-9});
  t.push_back({"mean_var_amax_logsumexp_vs_composed_of_views", rn_dt(f64, {4, 5, 6}),
               [](const Inputs& x) {
                 const Tensor a = x[0].transpose(0, 1), v = x[0].permute({2, 0, 1}).slice(0, 1, 6, 2);
                 const Tensor p = x[0].permute({2, 0, 1}), w = x[0].transpose(0, 2);
                 return cat({flat(checked(mean(a, {0}), mean_composed(H(a), {0}, false), x, 1e-9)),
                             flat(checked(var(v, {1}), var_composed(H(v), {1}, true, false), x, 1e-9)),
                             flat(checked(amax(p, {0, 2}), extreme_composed(H(p), {0, 2}, false, true), x, 1e-9)),
                             flat(checked(logsumexp(w, {1}), logsumexp_composed(H(w), {1}, false), x, 1e-9))});
               },
               1e-9});
  // sum_to: the bias-gradient shape [N, C] -> [C] (a column sum), and keeping dims of size one.
  t.push_back({"sum_to_vs_composed",
               [](Generator& g) {
                 return Inputs{randn({257, 33}, {.dtype = DType::Float64}, &g),
                               randn({4, 5, 6}, {.dtype = DType::Float64}, &g)};
               },
               [](const Inputs& x) {
                 return cat({checked(sum_to(x[0], {33}), sum_composed(H(x[0]), {0}, false), x, 1e-9),
                             flat(checked(sum_to(x[0], {1, 33}), sum_composed(H(x[0]), {0}, true), x, 1e-9)),
                             flat(checked(sum_to(x[1], {5, 1}), sum_composed(H(x[1]), {0, 2}, true).reshape({5, 1}), x,
                                          1e-9))});
               },
               1e-9});
  // prod along every dim, keepdim or not, and of a permuted view.
  t.push_back({"prod_vs_composed_every_dim", rn_dt(f64, {3, 4, 5}),
               [](const Inputs& x) {
                 std::vector<Tensor> parts;
                 for (int64_t d : {0, 1, 2, -1})
                   for (bool k : {false, true})
                     parts.push_back(flat(checked(prod(x[0], d, k), prod_composed(H(x[0]), d, k), x, 1e-9)));
                 const Tensor p = x[0].permute({2, 0, 1});
                 parts.push_back(flat(checked(prod(p, 2), prod_composed(H(p), 2, false), x, 1e-9)));
                 return cat(parts);
               },
               1e-9});
}

void add_extreme_and_split_rows(std::vector<OpRow>& t) {
  // max/min along a dim: values (with gradients) and indices (exactly), keepdim or not, and along a
  // transposed view; max and min over all elements.
  t.push_back(
      {"max_min_dim_vs_composed", rn_dt(f64, {4, 5, 6}),
       [](const Inputs& x) {
         std::vector<Tensor> parts;
         for (int64_t d : {0, 1, 2, -2})
           for (bool k : {false, true}) {
             parts.push_back(flat(checked(max(x[0], d, k).first, extreme_composed(H(x[0]), {d}, k, true), x, 1e-9)));
             parts.push_back(flat(checked(min(x[0], d, k).first, extreme_composed(H(x[0]), {d}, k, false), x, 1e-9)));
           }
         const Tensor v = x[0].select(2, 3).t();
         parts.push_back(flat(checked(max(v, 1).first, extreme_composed(H(v), {1}, false, true), x, 1e-9)));
         parts.push_back(flat(checked(max(x[0]), extreme_composed(H(x[0]), {}, false, true), x, 1e-9)));
         parts.push_back(flat(
             checked(min(x[0].select(2, 0).t()), extreme_composed(H(x[0].select(2, 0)), {}, false, false), x, 1e-9)));
         return cat(parts);
       },
       1e-9});
  t.push_back({"argmax_argmin_vs_composed", rn_dt(f64, {4, 6, 3}),
               [](const Inputs& x) {
                 std::vector<Tensor> parts;
                 for (int64_t d : {0, 1, 2, -1})
                   for (bool k : {false, true}) {
                     parts.push_back(flat(checked(argmax(x[0], d, k), arg_composed(H(x[0]), d, k, true), x, 0.0)));
                     parts.push_back(flat(checked(argmin(x[0], d, k), arg_composed(H(x[0]), d, k, false), x, 0.0)));
                     parts.push_back(flat(checked(max(x[0], d, k).second, arg_composed(H(x[0]), d, k, true), x, 0.0)));
                     parts.push_back(flat(checked(min(x[0], d, k).second, arg_composed(H(x[0]), d, k, false), x, 0.0)));
                   }
                 const Tensor tr = x[0].transpose(0, 1);  // the flat index follows the view's row-major order
                 for (const Tensor& a : {x[0], tr}) {
                   parts.push_back(flat(checked(argmax(a), arg_composed(H(a.reshape({-1})), 0, false, true), x, 0.0)));
                   parts.push_back(flat(checked(argmin(a), arg_composed(H(a.reshape({-1})), 0, false, false), x, 0.0)));
                 }
                 return cat(parts).to(DType::Float64);
               },
               0.0, false, false});
  // Few outputs with long reductions (rows split across threads) and few columns with many rows
  // (each column's rows split), with four threads; forward only (the backward is an expand).
  t.push_back({"sum_var_vs_composed_threaded_long_rows", rn_dt(f64, {2, 100003}),
               [](const Inputs& x) {
                 FourThreads threads;
                 return cat({checked(sum(x[0], {1}), sum_composed(H(x[0]), {1}, false), x, 1e-9, false),
                             flat(checked(sum(x[0]), sum_composed(H(x[0]), {}, false), x, 1e-9, false)),
                             checked(var(x[0], {1}), var_composed(H(x[0]), {1}, true, false), x, 1e-9, false)});
               },
               1e-9, false, false, false});
  t.push_back({"sum_var_amax_vs_composed_threaded_columns", rn_dt(f64, {50001, 9}),
               [](const Inputs& x) {
                 FourThreads threads;
                 return cat({checked(sum(x[0], {0}), sum_composed(H(x[0]), {0}, false), x, 1e-9, false),
                             checked(var(x[0], {0}), var_composed(H(x[0]), {0}, true, false), x, 1e-9, false),
                             checked(amax(x[0], {0}), max_fold_dim0(H(x[0])), x, 1e-9, false)});
               },
               1e-9, false, false, false});
  // float32 variance of data far from zero (a naive sum of squares minus the squared mean
  // cancels), held to 1e-5 of the float64 answer.
  t.push_back({"var_float32_large_mean", [](Generator& g) { return Inputs{add(rn(g, {200000}), 1e4)}; },
               [](const Inputs& x) {
                 return cat({var(x[0]).reshape({1}), var(x[0].view({400, 500}), {0})});
               },
               1e-5, false, false, false});
}

void add_tie_and_softmax_rows(std::vector<OpRow>& t) {
  // Finite differences on ties (central differences see half the slope on each side: the even
  // split), and on a product with one zero.
  auto literal = [](std::vector<double> v, Shape s) {
    return [v, s](Generator&) { return Inputs{from_vector<double>(v, s)}; };
  };
  t.push_back({"amax_amin_max_two_way_ties", literal({1, 3, 3, 0, -2, -2}, {2, 3}),
               [](const Inputs& x) {
                 return cat({amax(x[0], {1}), amin(x[0], {1}), max(x[0]).reshape({1})});
               },
               2e-4, true, true, false});
  t.push_back({"prod_with_one_zero", literal({2, 0, 3, 4, 5, 6}, {2, 3}), [](const Inputs& x) { return prod(x[0], 1); },
               2e-4, true, true, false});

  // softmax and log_softmax against exp(x - max) / sum: along every dim (and its negative
  // spelling), float32 and float64, logits spread by 3; through transposed, stepped and broadcast
  // views.
  auto softmax_composed = [](const Tensor& a, int64_t d, bool log_) {
    const Tensor shifted = sub(a, amax(a.detach(), {d}, true));
    const Tensor z = sum(exp(shifted), {d}, true);
    return log_ ? sub(shifted, log(z)) : div(exp(shifted), z);
  };
  auto softmax_checked = [softmax_composed](const Inputs& x, const Tensor& a, int64_t d, double tol) {
    return cat({flat(checked(softmax(a, d), softmax_composed(H(a), d, false), x, tol)),
                flat(checked(log_softmax(a, d), softmax_composed(H(a), d, true), x, tol))});
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    t.push_back({std::string("softmax_log_softmax_vs_composed_every_dim_") + dtype_name(dt), rn_dt(dt, {3, 4, 5}, 3.0),
                 [softmax_checked, tol = tol_of(dt)](const Inputs& x) {
                   std::vector<Tensor> parts;
                   for (int64_t d : {0, 1, 2, -1, -3}) parts.push_back(softmax_checked(x, x[0], d, tol));
                   parts.push_back(flat(checked(x[0].softmax(-1), softmax(x[0], 2), x, 0.0)));
                   parts.push_back(flat(checked(x[0].log_softmax(1), log_softmax(x[0], 1), x, 0.0)));
                   return cat(parts);
                 },
                 tol_of(dt)});
  }
  t.push_back({"softmax_log_softmax_vs_composed_of_views", rn_dt(f64, {5, 6, 4}),
               [softmax_checked](const Inputs& x) {
                 std::vector<Tensor> parts;
                 for (const Tensor& v :
                      {x[0].transpose(0, 2), x[0].slice(1, 0, 6, 2), x[0].select(2, 1).unsqueeze(2).expand({5, 6, 3})})
                   for (int64_t d : {0, 1, 2}) parts.push_back(softmax_checked(x, v, d, 1e-9));
                 return cat(parts);
               },
               1e-9});
  // Each softmax row sums to one, along every dim and along very long rows.
  t.push_back({"softmax_float32_sums_to_one_every_dim", rn_dt(DType::Float32, {7, 33, 9}, 5.0),
               [](const Inputs& x) {
                 const Tensor sums = cat({flat(sum(softmax(x[0], 0), {0})), flat(sum(softmax(x[0], 1), {1})),
                                          flat(sum(softmax(x[0], 2), {2}))});
                 return checked(sums, ones(sums.shape(), sums.options()), x, 1e-6, false);
               },
               1e-6, false, false});
  t.push_back({"softmax_float32_sums_to_one_rows_of_100000", rn_dt(DType::Float32, {3, 100000}, 2.0),
               [](const Inputs& x) {
                 const Tensor sums = sum(softmax(x[0], 1), {1});
                 return checked(sums, ones(sums.shape(), sums.options()), x, 1e-5, false);
               },
               1e-5, false, false, false});
}

void add_reduce_composed_rows(std::vector<OpRow>& t) {
  add_every_dim_set_rows(t);
  add_view_sum_and_prod_rows(t);
  add_extreme_and_split_rows(t);
  add_tie_and_softmax_rows(t);
}

}  // namespace

namespace {

using Make = std::function<Tensor(Generator&)>;

// Adds rows of one input made by `make` and the op `f` on it (tolerance `tol`; `grad`: its gradient
// is compared and checked by finite differences). An object, so that the table below reads as a
// list of `row(name, make, f)`.
struct OneInputRows {
  std::vector<OpRow>& rows;
  void operator()(const std::string& name, Make make, std::function<Tensor(const Tensor&)> f, double tol = 2e-4,
                  bool grad = true) const {
    rows.push_back({name, [make](Generator& g) { return Inputs{make(g)}; }, [f](const Inputs& x) { return f(x[0]); },
                    tol, grad, grad});
  }
};

// The inputs of the rows below: a plain matrix, one full of ties, and one without rows.
Tensor plain(Generator& g) {
  return rn(g, {37, 53});
}
Tensor ties(Generator& g) {
  return tied(g, {37, 53});
}
Tensor empty_rows(Generator& g) {
  return rn(g, {0, 7});
}

}  // namespace

void add_reduce_rows(std::vector<OpRow>& t) {
  const OneInputRows row{t};
  row("sum", plain, [](const Tensor& a) { return sum(a); });
  row("sum_dim0", plain, [](const Tensor& a) { return sum(a, {0}); });
  row("sum_empty_dim0", empty_rows, [](const Tensor& a) { return sum(a, {0}); });
  row(
      "sum_3d_dims02",
      [](Generator& g) {
        return rn(g, {5, 9, 13});
      },
      [](const Tensor& a) {
        return sum(a, {0, 2});
      });
  row("mean_dim1", plain, [](const Tensor& a) { return mean(a, {1}, true); });
  row("amax_dim1", plain, [](const Tensor& a) { return amax(a, {1}); });
  // Ties: the gradient is split among the tied elements by convention (the backends must agree),
  // which finite differences cannot check; the plain rows check the derivative.
  auto no_gradcheck = [&] { t.back().gradcheck = false; };
  row("amax_ties", ties, [](const Tensor& a) { return amax(a, {1}); });
  no_gradcheck();
  row("amin_all_ties", ties, [](const Tensor& a) { return amin(a); });
  no_gradcheck();
  row("max_dim1", plain, [](const Tensor& a) { return max(a, 1).first; });
  row("min_dim0", plain, [](const Tensor& a) { return min(a, 0, true).first; });
  row(
      "argmax_dim1_ties", ties, [](const Tensor& a) { return argmax(a, 1); }, 0.0, false);
  row(
      "argmin_dim0", plain, [](const Tensor& a) { return argmin(a, 0); }, 0.0, false);
  row("var_dim1", plain, [](const Tensor& a) { return var(a, {1}); });
  row("var_dim0", plain, [](const Tensor& a) { return var(a, {0}); });
  row("std_dim1", plain, [](const Tensor& a) { return ember::std(a, {1}); });
  row("norm", plain, [](const Tensor& a) { return norm(a); });
  row("norm_p1_dim1", plain, [](const Tensor& a) { return norm(a, 1.0, {1}); });
  row("norm_p3_dim0", plain, [](const Tensor& a) { return norm(a, 3.0, {0}); });
  row("norm_inf_ties", ties, [](const Tensor& a) { return norm(a, INFINITY, {1}); });
  no_gradcheck();
  row(
      "prod_dim0",
      [](Generator& g) {
        return near_one(g, {37, 53});
      },
      [](const Tensor& a) { return prod(a, 0); });
  row(
      "prod_long_rows_zeros",
      [](Generator& g) {
        Tensor x = near_one(g, {5, 300});
        return masked_fill(x, lt(rand({5, 300}, {}, &g), 0.004), 0.0);
      },
      [](const Tensor& a) { return prod(a, 1); });
  row("logsumexp", plain, [](const Tensor& a) { return logsumexp(a, {1}); });
  row("logsumexp_dim0", plain, [](const Tensor& a) { return logsumexp(a, {0}); });
  row("softmax", plain, [](const Tensor& a) { return softmax(a, 1); });
  row("softmax_dim0", plain, [](const Tensor& a) { return softmax(a, 0); });
  row("log_softmax", plain, [](const Tensor& a) { return log_softmax(a, 1); });
  row("sort_dim1", plain, [](const Tensor& a) { return sort(a, 1).first; });
  row("sort_dim0_descending", plain, [](const Tensor& a) { return sort(a, 0, true).first; });
  row(
      "sort_indices_ties", ties, [](const Tensor& a) { return sort(a, 1).second; }, 0.0, false);
  row(
      "sort_long_rows",
      [](Generator& g) {
        return rn(g, {2, 9000});
      },
      [](const Tensor& a) { return sort(a, 1).first; });
  row("topk_dim1", plain, [](const Tensor& a) { return topk(a, 5, 1).first; });
  row("topk_smallest_dim0", plain, [](const Tensor& a) { return topk(a, 3, 0, false).first; });
  row(
      "topk_long_rows",
      [](Generator& g) {
        return rn(g, {3, 20000});
      },
      [](const Tensor& a) { return topk(a, 100, 1).first; });
  add_reduce_composed_rows(t);
}

}  // namespace ember::ops_test
