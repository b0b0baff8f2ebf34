// sort and topk: values with their int64 positions along a dim; the gradient flows back to the
// positions the values came from.
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/index_kernels.h"
#include "core/ops/creation.h"
#include "core/ops/index.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

// The k first of a along dim in the given order; k == size sorts the whole dim.
std::pair<Tensor, Tensor> ordered(const Tensor& a, int64_t k, int64_t dim, bool largest, const char* op) {
  EMBER_CHECK(a.defined(), op, ": undefined tensor argument");
  dim = wrap_dim(dim, a.dim(), op);
  const int64_t n = a.dim() == 0 ? 1 : a.size(dim);
  EMBER_CHECK(k >= 0 && k <= n, op, ": k ", k, " is out of range for dim ", dim, " of size ", n,
              " (expected 0 <= k <= ", n, ")");
  // A 0-dim input is a 1-element vector to the kernel; k = 1 keeps the 0-dim shape.
  Shape shape = a.shape();
  if (a.dim() == 0) {
    if (k == 0) shape = {0};
  } else {
    shape[dim] = k;
  }
  Tensor values = empty(shape, a.options());
  Tensor indices = empty(shape, {DType::Int64, a.device()});
  if (values.numel() > 0) {
    NoGradGuard ng;
    auto vec = [](const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; };
    sort_stub(a.device())(vec(values), vec(indices), vec(a), dim, largest);
  }
  if (autograd::any_requires_grad({a})) {
    SavedTensor si(indices);
    Shape in_shape = a.shape();
    autograd::record(k == n ? "SortBackward" : "TopkBackward", {a}, {values},
                     [si, dim, in_shape](const Grads& g, const Needs&) -> Grads {
                       Tensor r = zeros(in_shape, g[0].options());
                       Tensor idx = si.get();
                       if (idx.numel() == 0) return {r};
                       auto vec = [](const Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; };
                       // Positions are distinct, so a plain scatter places every gradient.
                       scatter_stub(r.device())(vec(r), dim, vec(idx), vec(g[0]), false);
                       return {r};
                     });
  }
  return {values, indices};
}

}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim, bool largest) {
  return ordered(a, k, dim, largest, "topk");
}

std::pair<Tensor, Tensor> sort(const Tensor& a, int64_t dim, bool descending) {
  EMBER_CHECK(a.defined(), "sort: undefined tensor argument");
  const int64_t d = wrap_dim(dim, a.dim(), "sort");
  return ordered(a, a.dim() == 0 ? 1 : a.size(d), d, descending, "sort");
}

}  // namespace ember
