// Rows: cross_entropy with every option (class weights, ignore_index, label smoothing, each
// reduction, [N, C] and [N, C, d1, d2] logits, class and probability targets), each checked inside
// the row against PyTorch's definition composed from log_softmax, gather and sums, values and
// gradients (an oracle that shares no code with the fused kernels: tests/ops/composed.h); and the
// op itself on small shapes for finite differences. These rows took over tests/core's
// cross-entropy comparisons with loops and its gradchecks (core/nn_kernels.h).
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

Tensor rn64(Generator& g, Shape s) {
  return randn(std::move(s), {.dtype = DType::Float64}, &g);
}

// [C] as [1, C, 1, ...] for logits of `dims` dims.
Tensor per_class(const Tensor& v, int64_t dims) {
  Shape s(static_cast<size_t>(dims), 1);
  s[1] = v.size(0);
  return v.reshape(s);
}

Tensor reduce(const Tensor& per, const Tensor& denom, Reduction red) {
  if (red == Reduction::None) return per;
  return red == Reduction::Sum ? sum(per) : div(sum(per), denom);
}

// Class targets: per sample (1 - ls) * w[t] * -log p[t] + ls / C * sum_c w[c] * -log p[c], zero
// where the target is ignore_index; the mean divides by the sum of w[t] over the kept samples.
Tensor ce_class_composed(const Tensor& x, const Tensor& target, const Tensor& w, int64_t ignore, double ls,
                         Reduction red) {
  const int64_t C = x.size(1);
  const Tensor lp = log_softmax(x, 1);
  const Tensor kept = ne(target, static_cast<double>(ignore));
  const Tensor safe = where(kept, target, zeros_like(target));
  const Tensor picked = gather(lp, 1, safe.unsqueeze(1)).squeeze(1);
  const Tensor wt = w.defined() ? index_select(w, 0, safe.reshape({-1})).reshape(target.shape()) : ones_like(picked);
  const Tensor smooth = w.defined() ? sum(mul(lp, per_class(w, x.dim())), {1}) : sum(lp, {1});
  const Tensor per = add(mul(mul(wt, picked), -(1 - ls)), mul(smooth, -ls / static_cast<double>(C)));
  const Tensor zero = zeros({}, per.options());
  return reduce(where(kept, per, zero), sum(where(kept, wt, zero)), red);
}

// Probability targets, smoothed towards uniform: -sum_c w[c] * (p[c] (1 - ls) + ls / C) * log q[c];
// the mean divides by the number of samples.
Tensor ce_prob_composed(const Tensor& x, const Tensor& p, const Tensor& w, double ls, Reduction red) {
  const int64_t C = x.size(1);
  Tensor tgt = add(mul(p, 1 - ls), ls / static_cast<double>(C));
  if (w.defined()) tgt = mul(tgt, per_class(w, x.dim()));
  const Tensor per = neg(sum(mul(tgt, log_softmax(x, 1)), {1}));
  return reduce(per, full({}, static_cast<double>(per.numel()), per.options()), red);
}

const char* reduction_name(Reduction r) {
  return r == Reduction::None ? "none" : r == Reduction::Sum ? "sum" : "mean";
}

// Every reduction, in the order the rows of each family are added.
const std::vector<Reduction> kReductions = {Reduction::None, Reduction::Sum, Reduction::Mean};

Tensor targets(const std::vector<int64_t>& v, Shape s) {
  return from_vector(v, std::move(s));
}

}  // namespace

namespace {

void add_class_target_rows(std::vector<OpRow>& t) {
  const ComposedRows composed{t};
  // Class targets with an ignored sample, [7, 5] logits: weights x smoothing x reduction.
  for (bool weighted : {false, true})
    for (double ls : {0.0, 0.3})
      for (Reduction red : kReductions) {
        const std::string name = std::string("cross_entropy_vs_composed_class") + (weighted ? "_weighted" : "") +
                                 (ls > 0 ? "_smoothed" : "") + "_" + reduction_name(red);
        composed(
            name,
            [](Generator& g) {
              return Inputs{rn64(g, {7, 5}), targets({0, 4, 2, -100, 1, 3, 3}, {7}),
                            from_vector<double>({0.5, 1.0, 2.0, 0.25, 3.0}, {5})};
            },
            [weighted, ls, red](const Inputs& x) {
              const Tensor w = weighted ? x[2] : Tensor();
              return checked_composed(
                  cross_entropy(x[0], x[1], {.weight = w, .label_smoothing = ls, .reduction = red}), x,
                  [weighted, ls, red](const Inputs& h) {
                    return ce_class_composed(h[0], h[1], weighted ? h[2] : Tensor(), -100, ls, red);
                  },
                  1e-9);
            },
            {2});
      }
  composed(
      "cross_entropy_vs_composed_custom_ignore_index",
      [](Generator& g) {
        return Inputs{rn64(g, {7, 5}), targets({0, 4, 2, 3, 1, 3, 3}, {7})};
      },
      [](const Inputs& x) {
        return checked_composed(
            cross_entropy(x[0], x[1], {.ignore_index = 3}), x,
            [](const Inputs& h) { return ce_class_composed(h[0], h[1], Tensor(), 3, 0, Reduction::Mean); }, 1e-9);
      },
      {});
  // [N, C, d1, d2] logits, class weights, smoothing and an ignored position.
  for (Reduction red : {Reduction::None, Reduction::Mean})
    composed(
        std::string("cross_entropy_vs_composed_4d_weighted_smoothed_") + reduction_name(red),
        [](Generator& g) {
          return Inputs{rn64(g, {2, 4, 3, 2}), targets({0, 1, 2, 3, -100, 0, 3, 3, 2, 1, 0, 2}, {2, 3, 2}),
                        from_vector<double>({1, 2, 3, 4}, {4})};
        },
        [red](const Inputs& x) {
          return checked_composed(
              cross_entropy(x[0], x[1], {.weight = x[2], .label_smoothing = 0.1, .reduction = red}), x,
              [red](const Inputs& h) { return ce_class_composed(h[0], h[1], h[2], -100, 0.1, red); }, 1e-9);
        },
        {2});
}

void add_probability_target_rows(std::vector<OpRow>& t) {
  const ComposedRows composed{t};
  // Probability targets (rows that sum to one; they get gradients too): weights x smoothing x
  // reduction, and [N, C, d] logits.
  for (bool weighted : {false, true})
    for (double ls : {0.0, 0.2})
      for (Reduction red : kReductions) {
        const std::string name = std::string("cross_entropy_vs_composed_prob") + (weighted ? "_weighted" : "") +
                                 (ls > 0 ? "_smoothed" : "") + "_" + reduction_name(red);
        composed(
            name,
            [](Generator& g) {
              return Inputs{rn64(g, {3, 4}), softmax(rn64(g, {3, 4}), 1), from_vector<double>({0.5, 1, 2, 1.5}, {4})};
            },
            [weighted, ls, red](const Inputs& x) {
              const Tensor w = weighted ? x[2] : Tensor();
              return checked_composed(
                  cross_entropy(x[0], x[1], {.weight = w, .label_smoothing = ls, .reduction = red}), x,
                  [weighted, ls, red](const Inputs& h) {
                    return ce_prob_composed(h[0], h[1], weighted ? h[2] : Tensor(), ls, red);
                  },
                  1e-9);
            },
            {2});
      }
  composed(
      "cross_entropy_vs_composed_prob_3d",
      [](Generator& g) {
        return Inputs{rn64(g, {2, 3, 2}), softmax(rn64(g, {2, 3, 2}), 1)};
      },
      [](const Inputs& x) {
        return checked_composed(
            cross_entropy(x[0], x[1]), x,
            [](const Inputs& h) { return ce_prob_composed(h[0], h[1], Tensor(), 0, Reduction::Mean); }, 1e-9);
      },
      {});
}

void add_cross_entropy_gradcheck_rows(std::vector<OpRow>& t) {
  // The op itself for finite differences: every reduction with and without smoothing (weighted),
  // 4-D logits, and probability targets differentiated in both arguments.
  for (Reduction red : kReductions)
    for (double ls : {0.0, 0.25})
      t.push_back({std::string("cross_entropy_small_weighted_") + (ls > 0 ? "smoothed_" : "") + reduction_name(red),
                   [](Generator& g) {
                     return Inputs{rn(g, {5, 4}), targets({0, 3, -100, 1, 3}, {5}), tensor({0.5, 1, 2, 1.5})};
                   },
                   [ls, red](const Inputs& x) {
                     return cross_entropy(x[0], x[1], {.weight = x[2], .label_smoothing = ls, .reduction = red});
                   },
                   2e-4,
                   true,
                   true,
                   true,
                   {2}});
  t.push_back({"cross_entropy_small_4d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 2, 2}), targets({0, 1, 2, 2, 1, 0, -100, 2}, {2, 2, 2})};
               },
               [](const Inputs& x) { return cross_entropy(x[0], x[1]); }});
  t.push_back({"cross_entropy_small_prob_weighted_smoothed",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 4}), rn(g, {3, 4}), tensor({0.5, 1, 2, 1.5})};
               },
               [](const Inputs& x) { return cross_entropy(x[0], x[1], {.weight = x[2], .label_smoothing = 0.1}); },
               2e-4,
               true,
               true,
               true,
               {2}});
  t.push_back({"cross_entropy_small_prob_3d",
               [](Generator& g) {
                 return Inputs{rn(g, {2, 3, 2}), rn(g, {2, 3, 2})};
               },
               [](const Inputs& x) { return cross_entropy(x[0], x[1]); }});
}

}  // namespace

void add_loss_rows(std::vector<OpRow>& t) {
  add_class_target_rows(t);
  add_probability_target_rows(t);
  add_cross_entropy_gradcheck_rows(t);
}

}  // namespace ember::ops_test
