#include "core/ops/reduce.h"

#include <algorithm>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/reduce_kernels.h"

namespace ember {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

// Sorted unique dims to reduce (all dims when `dims` is empty).
std::vector<int64_t> reduce_dims(const Tensor& a, const std::vector<int64_t>& dims, const char* op) {
  std::vector<int64_t> r;
  if (dims.empty()) {
    for (int64_t d = 0; d < a.dim(); ++d) r.push_back(d);
    return r;
  }
  for (int64_t d : dims) r.push_back(wrap_dim(d, a.dim(), op));
  std::sort(r.begin(), r.end());
  EMBER_CHECK(std::adjacent_find(r.begin(), r.end()) == r.end(), op, ": a dim appears twice in the reduction dims");
  return r;
}

Shape reduced_shape(const Tensor& a, const std::vector<int64_t>& rd, bool keepdim) {
  Shape s;
  for (int64_t d = 0; d < a.dim(); ++d) {
    bool red = std::binary_search(rd.begin(), rd.end(), d);
    if (!red)
      s.push_back(a.shape()[d]);
    else if (keepdim)
      s.push_back(1);
  }
  return s;
}

// Moves reduced dims last and returns a contiguous [outer, inner] matrix.
Tensor as_rows(const Tensor& a, const std::vector<int64_t>& rd) {
  std::vector<int64_t> perm;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!std::binary_search(rd.begin(), rd.end(), d)) {
      perm.push_back(d);
      outer *= a.shape()[d];
    }
  for (int64_t d : rd) {
    perm.push_back(d);
    inner *= a.shape()[d];
  }
  NoGradGuard ng;
  return a.permute(perm).contiguous().view({outer, inner});
}

}  // namespace

Tensor sum(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  auto rd = reduce_dims(a, dims, "sum");
  Shape out_shape = reduced_shape(a, rd, keepdim);
  DType dt = a.dtype() == DType::Bool ? DType::Int64 : a.dtype();
  Tensor in = a.dtype() == dt ? a : a.to(dt);
  Tensor rows = as_rows(in, rd);
  Tensor out = empty({rows.size(0)}, {dt, a.device()});
  if (rows.size(1) == 0) {
    out.zero_();
  } else {
    reduce_stub(a.device())(ReduceOp::Sum, out, rows);
  }
  out = out.view(out_shape);
  Shape in_shape = a.shape();
  Shape kept = reduced_shape(a, rd, true);
  autograd::record("SumBackward", {a}, {out}, [in_shape, kept](const Grads& g, const Needs&) -> Grads {
    return {g[0].reshape(kept).expand(in_shape).contiguous()};
  });
  return out;
}

Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  EMBER_CHECK(is_floating(a.dtype()), "mean: expected a floating-point tensor, got ", dtype_name(a.dtype()));
  auto rd = reduce_dims(a, dims, "mean");
  int64_t count = 1;
  for (int64_t d : rd) count *= a.shape()[d];
  return div(sum(a, dims, keepdim), static_cast<double>(count));
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  EMBER_CHECK(lead >= 0, "sum_to: cannot reduce shape ", shape_str(grad.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (shape[d - lead] == 1 && grad.shape()[d] != 1) {
      dims.push_back(d);
    } else {
      EMBER_CHECK(shape[d - lead] == grad.shape()[d], "sum_to: cannot reduce shape ", shape_str(grad.shape()), " to ",
                  shape_str(shape));
    }
  }
  if (dims.empty()) return grad.reshape(shape);
  return sum(grad, dims, true).reshape(shape);
}

}  // namespace ember
