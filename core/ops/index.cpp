// index_select, gather, scatter / scatter_add, masked_fill, one_hot, tril / triu and embedding.
#include "core/ops/index.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/index_kernels.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

void check_defined(const Tensor& t, const char* op, const char* what) {
  EMBER_CHECK(t.defined(), op, ": ", what, " is an undefined tensor");
}

// The index as a contiguous int64 tensor (int32 is converted), on `self`'s device.
Tensor index_arg(const Tensor& index, const Tensor& self, const char* op, const char* what = "index") {
  check_defined(index, op, what);
  EMBER_CHECK(index.dtype() == DType::Int64 || index.dtype() == DType::Int32, op, ": ", what,
              " must be an int64 or int32 tensor, got ", dtype_name(index.dtype()));
  EMBER_CHECK(index.device() == self.device(), op, ": ", what, " is on ", index.device(), " but the tensor is on ",
              self.device());
  NoGradGuard ng;
  return index.to(DType::Int64).contiguous();
}

// Every index must lie in [0, size); the error names the first bad extreme found.
void check_range(const Tensor& idx, int64_t size, const char* op, const std::string& where) {
  if (idx.numel() == 0) return;
  int64_t lo = 0, hi = 0;
  index_range_stub(idx.device())(idx, &lo, &hi);
  if (lo >= 0 && hi < size) return;
  const int64_t bad = lo < 0 ? lo : hi;
  if (size == 0) EMBER_FAIL(op, ": index ", bad, " is out of range for ", where, " of size 0 (no valid index)");
  EMBER_FAIL(op, ": index ", bad, " is out of range for ", where, " of size ", size, " (valid range [0, ", size - 1,
             "])");
}

std::string dim_name(int64_t dim) {
  return "dim " + std::to_string(dim);
}

// A 0-dim tensor behaves as a 1-element vector for the dim-indexed ops (as in PyTorch).
Tensor as_1d(const Tensor& t) {
  NoGradGuard ng;
  return t.dim() == 0 ? t.view({1}) : t;
}

// zeros of `shape` with `g` scattered (or added) at index along dim.
Tensor scatter_into_zeros(const Shape& shape, int64_t dim, const Tensor& idx, const Tensor& g, bool accumulate) {
  Tensor r = zeros(shape, g.options());
  scatter_stub(g.device())(as_1d(r), dim, as_1d(idx), as_1d(g), accumulate);
  return r;
}

void check_index_shapes(const Tensor& a, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  EMBER_CHECK(index.dim() == a.dim(), op, ": index must have as many dims as the input (", a.dim(), "), got shape ",
              shape_str(index.shape()));
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d != dim)
      EMBER_CHECK(index.size(d) <= a.size(d), op, ": index shape ", shape_str(index.shape()),
                  " is larger than the input's ", shape_str(a.shape()), " in dim ", d);
  }
  if (src) {
    EMBER_CHECK(src->dim() == a.dim(), op, ": src must have as many dims as the input (", a.dim(), "), got shape ",
                shape_str(src->shape()));
    for (int64_t d = 0; d < a.dim(); ++d)
      EMBER_CHECK(index.size(d) <= src->size(d), op, ": index shape ", shape_str(index.shape()),
                  " is larger than src's ", shape_str(src->shape()), " in dim ", d);
  }
}

Tensor scatter_impl(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src, bool accumulate,
                    const char* op) {
  check_defined(a, op, "input");
  check_defined(src, op, "src");
  dim = wrap_dim(dim, a.dim(), op);
  Tensor idx = index_arg(index, a, op);
  EMBER_CHECK(src.dtype() == a.dtype(), op, ": src dtype ", dtype_name(src.dtype()), " differs from the input's ",
              dtype_name(a.dtype()));
  EMBER_CHECK(src.device() == a.device(), op, ": src is on ", src.device(), " but the input is on ", a.device());
  check_index_shapes(a, dim, idx, &src, op);
  check_range(idx, a.dim() == 0 ? 1 : a.size(dim), op, dim_name(dim));
  Tensor out = empty(a.shape(), a.options());
  {
    NoGradGuard ng;
    out.copy_(a);
    scatter_stub(a.device())(as_1d(out), dim, as_1d(idx), as_1d(src), accumulate);
  }
  if (autograd::any_requires_grad({a, src})) {
    Shape src_shape = src.shape(), idx_shape = idx.shape();
    SavedTensor si(idx);
    autograd::record(accumulate ? "ScatterAddBackward" : "ScatterBackward", {a, src}, {out},
                     [si, dim, accumulate, src_shape, idx_shape](const Grads& g, const Needs& need) -> Grads {
                       Tensor idx = si.get();
                       Grads r(2);
                       if (need[0]) {
                         if (accumulate) {
                           r[0] = g[0];
                         } else {
                           // Overwritten positions get no gradient.
                           Tensor ga = g[0].clone();
                           Tensor z = zeros({}, g[0].options()).expand(idx_shape);
                           scatter_stub(ga.device())(as_1d(ga), dim, as_1d(idx), as_1d(z), false);
                           r[0] = ga;
                         }
                       }
                       if (need[1]) {
                         Tensor gs = gather(g[0], dim, idx);
                         if (src_shape != idx_shape) {
                           Tensor full_g = zeros(src_shape, g[0].options());
                           Tensor region = full_g;
                           for (int64_t d = 0; d < static_cast<int64_t>(idx_shape.size()); ++d)
                             region = region.narrow(d, 0, idx_shape[d]);
                           region.copy_(gs);
                           gs = full_g;
                         }
                         r[1] = gs;
                       }
                       return r;
                     });
  }
  return out;
}

Tensor trilu(const Tensor& a, int64_t diagonal, bool upper) {
  const char* op = upper ? "triu" : "tril";
  check_defined(a, op, "input");
  EMBER_CHECK(a.dim() >= 2, op, ": expected a tensor with at least 2 dims, got shape ", shape_str(a.shape()));
  Tensor out = empty(a.shape(), a.options());
  trilu_stub(a.device())(out, a, diagonal, upper);
  autograd::record(upper ? "TriuBackward" : "TrilBackward", {a}, {out},
                   [diagonal, upper](const Grads& g, const Needs&) -> Grads { return {trilu(g[0], diagonal, upper)}; });
  return out;
}

}  // namespace

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  check_defined(a, "index_select", "input");
  EMBER_CHECK(a.dim() >= 1, "index_select: cannot index a 0-dim tensor");
  dim = wrap_dim(dim, a.dim(), "index_select");
  Tensor idx = index_arg(index, a, "index_select");
  EMBER_CHECK(idx.dim() <= 1, "index_select: index must be 0-D or 1-D, got shape ", shape_str(idx.shape()));
  check_range(idx, a.size(dim), "index_select", dim_name(dim));
  Shape shape = a.shape();
  shape[dim] = idx.numel();
  Tensor out = empty(shape, a.options());
  Tensor src;
  {
    NoGradGuard ng;
    src = a.contiguous();
  }
  index_select_stub(a.device())(out, src, dim, idx);
  if (autograd::any_requires_grad({a})) {
    Shape in_shape = a.shape();
    SavedTensor si(idx);
    autograd::record("IndexSelectBackward", {a}, {out}, [si, dim, in_shape](const Grads& g, const Needs&) -> Grads {
      Tensor r = zeros(in_shape, g[0].options());
      index_add_stub(r.device())(r, dim, si.get(), g[0].contiguous());
      return {r};
    });
  }
  return out;
}

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  check_defined(a, "gather", "input");
  dim = wrap_dim(dim, a.dim(), "gather");
  Tensor idx = index_arg(index, a, "gather");
  check_index_shapes(a, dim, idx, nullptr, "gather");
  check_range(idx, a.dim() == 0 ? 1 : a.size(dim), "gather", dim_name(dim));
  Tensor out = empty(idx.shape(), a.options());
  gather_stub(a.device())(as_1d(out), as_1d(a), dim, as_1d(idx));
  if (autograd::any_requires_grad({a})) {
    Shape in_shape = a.shape();
    SavedTensor si(idx);
    autograd::record("GatherBackward", {a}, {out}, [si, dim, in_shape](const Grads& g, const Needs&) -> Grads {
      return {scatter_into_zeros(in_shape, dim, si.get(), g[0], true)};
    });
  }
  return out;
}

Tensor scatter(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(a, dim, index, src, false, "scatter");
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  return scatter_impl(a, dim, index, src, true, "scatter_add");
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  check_defined(a, "masked_fill", "input");
  check_defined(mask, "masked_fill", "mask");
  EMBER_CHECK(mask.dtype() == DType::Bool, "masked_fill: mask must be a bool tensor, got ", dtype_name(mask.dtype()));
  EMBER_CHECK(mask.device() == a.device(), "masked_fill: mask is on ", mask.device(), " but the input is on ",
              a.device());
  const Shape shape = broadcast_shapes(a.shape(), mask.shape(), "masked_fill");
  Tensor out = empty(shape, a.options());
  {
    NoGradGuard ng;
    masked_fill_stub(a.device())(out, a.shape() == shape ? a : a.expand(shape),
                                 mask.shape() == shape ? mask : mask.expand(shape), value);
  }
  if (autograd::any_requires_grad({a})) {
    Tensor m = mask.detach();
    Shape in_shape = a.shape();
    autograd::record("MaskedFillBackward", {a}, {out}, [m, in_shape](const Grads& g, const Needs&) -> Grads {
      return {sum_to(masked_fill(g[0], m, 0.0), in_shape)};
    });
  }
  return out;
}

Tensor one_hot(const Tensor& labels, int64_t num_classes) {
  check_defined(labels, "one_hot", "labels");
  Tensor l = index_arg(labels, labels, "one_hot", "labels");
  EMBER_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or non-negative, got ", num_classes);
  int64_t lo = 0, hi = -1;
  if (l.numel() > 0) index_range_stub(l.device())(l, &lo, &hi);
  EMBER_CHECK(lo >= 0, "one_hot: class values must be non-negative, got ", lo);
  if (num_classes == -1) {
    EMBER_CHECK(l.numel() > 0, "one_hot: cannot infer num_classes from an empty tensor; pass num_classes");
    num_classes = hi + 1;
  }
  EMBER_CHECK(hi < num_classes, "one_hot: class value ", hi, " is out of range for num_classes ", num_classes,
              " (valid range [0, ", num_classes - 1, "])");
  Shape shape = labels.shape();
  shape.push_back(num_classes);
  Tensor out = empty(shape, {DType::Int64, labels.device()});
  if (out.numel() > 0) one_hot_stub(labels.device())(out, l);
  return out;
}

Tensor tril(const Tensor& a, int64_t diagonal) {
  return trilu(a, diagonal, false);
}

Tensor triu(const Tensor& a, int64_t diagonal) {
  return trilu(a, diagonal, true);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_defined(weight, "embedding", "weight");
  EMBER_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [num_embeddings, dim], got shape ",
              shape_str(weight.shape()));
  const int64_t num = weight.size(0), width = weight.size(1);
  Tensor idx = index_arg(indices, weight, "embedding", "indices");
  EMBER_CHECK(padding_idx >= -1 && padding_idx < num, "embedding: padding_idx ", padding_idx,
              " is out of range for a table of ", num, " rows (expected -1 for none, or [0, ", num - 1, "])");
  if (idx.numel() > 0) {
    int64_t lo = 0, hi = 0;
    index_range_stub(idx.device())(idx, &lo, &hi);
    const int64_t bad = lo < 0 ? lo : hi;
    EMBER_CHECK(lo >= 0 && hi < num, "embedding: index ", bad, " is out of range for a table of ", num,
                " rows (valid range [0, ", num - 1, "])");
  }
  Shape shape = indices.shape();
  shape.push_back(width);
  Tensor out = empty(shape, weight.options());
  Tensor flat_idx, w;
  {
    NoGradGuard ng;
    flat_idx = idx.view({-1});
    w = weight.contiguous();
    index_select_stub(weight.device())(out.view({flat_idx.numel(), width}), w, 0, flat_idx);
  }
  if (autograd::any_requires_grad({weight})) {
    SavedTensor si(flat_idx);
    autograd::record("EmbeddingBackward", {weight}, {out},
                     [si, num, width, padding_idx](const Grads& g, const Needs&) -> Grads {
                       Tensor flat_idx = si.get();
                       Tensor r = zeros({num, width}, g[0].options());
                       index_add_stub(r.device())(r, 0, flat_idx, g[0].reshape({flat_idx.numel(), width}).contiguous());
                       if (padding_idx >= 0) r.select(0, padding_idx).zero_();
                       return {r};
                     });
  }
  return out;
}

}  // namespace ember
