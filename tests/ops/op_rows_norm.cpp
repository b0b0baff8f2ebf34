// Rows: batch norm (training and eval, [N, C], [N, C, L], [N, C, H, W] and 5-D, with and without
// affine parameters) and layer norm (one, two and three normalised dims, affine, weight only, none)
// each checked inside the row against the same normalisation composed from mean, var, sqrt and
// broadcasting, values and gradients (an oracle that shares no code with the norm kernels:
// tests/ops/composed.h); float32 batch statistics of badly centred data; and the ops themselves on
// small shapes for finite differences. These rows took over tests/core's norm comparisons with
// loops and its gradchecks (core/nn_kernels.h).
#include <string>
#include <vector>

#include "composed.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

Tensor rn64(Generator& g, Shape s) {
  return randn(std::move(s), {.dtype = DType::Float64}, &g);
}

// [C] as [1, C, 1, ...] for an input of `dims` dims.
Tensor per_channel(const Tensor& v, int64_t dims) {
  Shape s(static_cast<size_t>(dims), 1);
  s[1] = v.size(0);
  return v.reshape(s);
}

// (x - mean) / sqrt(var + eps) * w + b over every dim but the channels (dim 1): batch statistics
// (biased variance) in training, the given running ones in eval.
Tensor batch_norm_composed(const Tensor& x, const Tensor& rm, const Tensor& rv, const Tensor& w, const Tensor& b,
                           bool training, double eps) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  const Tensor m = training ? mean(x, dims, true) : per_channel(rm, x.dim());
  const Tensor v = training ? var(x, dims, false, true) : per_channel(rv, x.dim());
  Tensor y = div(sub(x, m), sqrt(add(v, eps)));
  if (w.defined()) y = mul(y, per_channel(w, x.dim()));
  if (b.defined()) y = add(y, per_channel(b, x.dim()));
  return y;
}

Tensor layer_norm_composed(const Tensor& x, int64_t normalized_dims, const Tensor& w, const Tensor& b) {
  std::vector<int64_t> dims;
  for (int64_t d = x.dim() - normalized_dims; d < x.dim(); ++d) dims.push_back(d);
  Tensor y = div(sub(x, mean(x, dims, true)), sqrt(add(var(x, dims, false, true), 1e-5)));
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return y;
}

std::string shape_name(const Shape& s) {
  std::string r;
  for (int64_t d : s) {
    if (!r.empty()) r += 'x';
    r += std::to_string(d);
  }
  return r;
}

}  // namespace

namespace {

// The op against its composition in training and eval, and float32 badly centred.
void add_batch_norm_composed_rows(std::vector<OpRow>& t) {
  const ComposedRows composed{t};
  for (const Shape& s : {Shape{6, 3}, Shape{4, 3, 5}, Shape{2, 3, 4, 5}, Shape{3, 3, 2, 2, 2}}) {
    composed(
        "batch_norm_train_vs_composed_" + shape_name(s),
        [s](Generator& g) {
          return Inputs{rn64(g, s), rn64(g, {3}), rn64(g, {3})};
        },
        [](const Inputs& x) {
          return checked_composed(
              batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true), x,
              [](const Inputs& h) { return batch_norm_composed(h[0], Tensor(), Tensor(), h[1], h[2], true, 1e-5); },
              1e-9);
        });
    composed(
        "batch_norm_train_no_affine_eps1e_3_vs_composed_" + shape_name(s),
        [s](Generator& g) { return Inputs{rn64(g, s)}; },
        [](const Inputs& x) {
          return checked_composed(
              batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-3), x,
              [](const Inputs& h) {
                return batch_norm_composed(h[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 1e-3);
              },
              1e-9);
        });
  }
  // Eval: the running statistics are constants (inputs 3 and 4), left as they were.
  composed(
      "batch_norm_eval_vs_composed",
      [](Generator& g) {
        return Inputs{rn64(g, {5, 2, 3}), rn64(g, {2}), rn64(g, {2}), rn64(g, {2}), add(abs(rn64(g, {2})), 0.25)};
      },
      [](const Inputs& x) {
        return checked_composed(
            batch_norm(x[0], x[3], x[4], x[1], x[2], false), x,
            [](const Inputs& h) { return batch_norm_composed(h[0], h[3], h[4], h[1], h[2], false, 1e-5); }, 1e-9);
      },
      {3, 4});
  // Mean 1e4, spread 0.1: a float32 accumulation of x^2 would lose the variance entirely.
  t.push_back({"batch_norm_float32_badly_centred",
               [](Generator& g) {
                 return Inputs{add(mul(rn64(g, {64, 2, 8, 8}), 0.1), 1e4).to(DType::Float32)};
               },
               [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }, 3e-3,
               false, false});
}

// The op against its composition over every trailing shape.
void add_layer_norm_composed_rows(std::vector<OpRow>& t) {
  const ComposedRows composed{t};
  for (const Shape& ns : {Shape{5}, Shape{4, 5}, Shape{3, 4, 5}}) {
    const int64_t nd = static_cast<int64_t>(ns.size());
    composed(
        "layer_norm_vs_composed_" + shape_name(ns),
        [ns](Generator& g) {
          return Inputs{rn64(g, {2, 3, 4, 5}), rn64(g, ns), rn64(g, ns)};
        },
        [ns, nd](const Inputs& x) {
          return checked_composed(
              layer_norm(x[0], ns, x[1], x[2]), x,
              [nd](const Inputs& h) { return layer_norm_composed(h[0], nd, h[1], h[2]); }, 1e-9);
        });
    composed(
        "layer_norm_no_affine_vs_composed_" + shape_name(ns),
        [](Generator& g) {
          return Inputs{rn64(g, {2, 3, 4, 5})};
        },
        [ns, nd](const Inputs& x) {
          return checked_composed(
              layer_norm(x[0], ns), x,
              [nd](const Inputs& h) { return layer_norm_composed(h[0], nd, Tensor(), Tensor()); }, 1e-9);
        });
  }
  composed(
      "layer_norm_weight_only_vs_composed",
      [](Generator& g) {
        return Inputs{rn64(g, {3, 2, 4}), rn64(g, {4})};
      },
      [](const Inputs& x) {
        return checked_composed(
            layer_norm(x[0], {4}, x[1]), x,
            [](const Inputs& h) { return layer_norm_composed(h[0], 1, h[1], Tensor()); }, 1e-9);
      });
}

void add_norm_gradcheck_rows(std::vector<OpRow>& t) {
  // The ops themselves on small shapes, for finite differences in float64.
  for (const Shape& s : {Shape{5, 3}, Shape{2, 3, 2, 3}}) {
    t.push_back({"batch_norm_train_small_" + shape_name(s),
                 [s](Generator& g) {
                   return Inputs{rn(g, s), rn(g, {3}), rn(g, {3})};
                 },
                 [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }});
    t.push_back({"batch_norm_train_no_affine_small_" + shape_name(s), [s](Generator& g) { return Inputs{rn(g, s)}; },
                 [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }});
    OpRow eval{"batch_norm_eval_small_" + shape_name(s),
               [s](Generator& g) {
                 return Inputs{rn(g, s), rn(g, {3}), rn(g, {3}), rn(g, {3}), add(square(rn(g, {3})), 0.5)};
               },
               [](const Inputs& x) { return batch_norm(x[0], x[3], x[4], x[1], x[2], false); }};
    eval.constants = {3, 4};
    t.push_back(std::move(eval));
  }
  t.push_back({"layer_norm_small_two_dims_affine",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 2, 4}), rn(g, {2, 4}), rn(g, {2, 4})};
               },
               [](const Inputs& x) {
                 return layer_norm(x[0], {2, 4}, x[1], x[2]);
               }});
  t.push_back({"layer_norm_small_no_affine",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 2, 4})};
               },
               [](const Inputs& x) { return layer_norm(x[0], {4}); }});
  t.push_back({"layer_norm_small_weight_only",
               [](Generator& g) {
                 return Inputs{rn(g, {3, 2, 4}), rn(g, {4})};
               },
               [](const Inputs& x) { return layer_norm(x[0], {4}, x[1]); }});
}

}  // namespace

void add_norm_rows(std::vector<OpRow>& t) {
  add_batch_norm_composed_rows(t);
  add_layer_norm_composed_rows(t);
  add_norm_gradcheck_rows(t);
}

}  // namespace ember::ops_test
