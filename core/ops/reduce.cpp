// Reduction ops: argument checks, output shapes and autograd. The input reaches the kernels as
// a view with the reduced dims permuted last (no copy); the kernels pick row or column loops
// from the strides (core/cpu/reduce_kernel.cpp). Backwards are single kernel calls on
// broadcast views, so none of them materialises more than the gradient it returns.
#include "core/ops/reduce.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/reduce_kernels.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

std::string dims_str(const std::vector<int64_t>& dims) {
  return shape_str(dims);
}

void check_defined(const Tensor& a, const char* op) {
  EMBER_CHECK(a.defined(), op, ": the input tensor is undefined");
}

void check_floating(const Tensor& a, const char* op) {
  EMBER_CHECK(is_floating(a.dtype()) && a.dtype() != DType::Float16 && a.dtype() != DType::BFloat16, op,
              ": expected a float32 or float64 tensor, got ", dtype_name(a.dtype()));
}

// The shapes of a reduction: what a backward needs (it captures these, never the input view,
// which would keep the input's memory alive as long as the graph).
struct ReduceShape {
  std::vector<int64_t> rd;  // sorted reduced dims (empty for a 0-dim input)
  Shape in_shape;
  Shape out_shape;  // the result's shape (keepdim honoured)
  Shape kept;       // the result's shape with keepdim, for broadcasting gradients back
  int64_t R = 1;    // reduced element count
};

struct Plan : ReduceShape {
  Tensor view;  // the input permuted to [kept dims..., reduced dims...]
  int64_t nred = 0;
  ReduceShape shape() const { return *this; }
};

// `dims` empty means all dims.
Plan plan_reduce(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  check_defined(a, op);
  Plan p;
  p.in_shape = a.shape();
  const int64_t nd = a.dim();
  if (dims.empty()) {
    for (int64_t d = 0; d < nd; ++d) p.rd.push_back(d);
  } else {
    for (int64_t d : dims) p.rd.push_back(wrap_dim(d, nd, op));
    std::sort(p.rd.begin(), p.rd.end());
    auto dup = std::adjacent_find(p.rd.begin(), p.rd.end());
    EMBER_CHECK(dup == p.rd.end(), op, ": dim ", *dup, " appears more than once in dims ", dims_str(dims));
    if (nd == 0) p.rd.clear();  // dim 0 / -1 of a 0-dim tensor: nothing to reduce
  }
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < nd; ++d) {
    const bool red = std::binary_search(p.rd.begin(), p.rd.end(), d);
    if (red) {
      p.R *= a.shape()[d];
      p.kept.push_back(1);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      perm.push_back(d);
      p.kept.push_back(a.shape()[d]);
      p.out_shape.push_back(a.shape()[d]);
    }
  }
  for (int64_t d : p.rd) perm.push_back(d);
  p.nred = static_cast<int64_t>(p.rd.size());
  NoGradGuard ng;
  p.view = a.permute(perm);
  return p;
}

// Bool has no arithmetic kernels; its bytes are 0/1, so uint8 computes the same results.
Tensor bool_as_uint8(const Tensor& a) {
  if (a.dtype() != DType::Bool) return a;
  NoGradGuard ng;
  return a.to(DType::UInt8);
}

// A kept-shape tensor broadcast back to the input's shape.
Tensor spread(const Tensor& t, const ReduceShape& p) {
  return t.reshape(p.kept).expand(p.in_shape);
}

Tensor grad_kernel(ReduceGradOp op, const Tensor& x, const Tensor& a, const Tensor& b, double pval) {
  Tensor gi = empty(x.shape(), x.options());
  reduce_grad_stub(x.device())(op, gi, x, a, b.defined() ? b : a, pval);
  return gi;
}

Tensor run_reduce(ReduceOp op, const Plan& p, DType out_dtype, double param) {
  Tensor out = empty(p.out_shape, {out_dtype, p.view.device()});
  reduce_stub(p.view.device())(op, out, p.view, p.nred, param);
  return out;
}

void check_nonempty_reduction(const Plan& p, const char* op) {
  EMBER_CHECK(p.R > 0, op, ": cannot reduce over zero elements (input shape ", shape_str(p.in_shape), ", reduced dims ",
              dims_str(p.rd), "); the result would have no value");
}

// Products of shape[0, dim), shape[dim], shape(dim, end): the [A, R, C] view around one dim.
std::array<int64_t, 3> split_at(const Shape& s, int64_t dim) {
  std::array<int64_t, 3> r{1, 1, 1};
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d) r[d < dim ? 0 : d == dim ? 1 : 2] *= s[d];
  return r;
}

// amax/amin/max()/min(): values only; the gradient is shared evenly among tied extremes.
Tensor extreme(const Tensor& a_in, const std::vector<int64_t>& dims, bool keepdim, bool is_max, const char* op) {
  const Tensor a = bool_as_uint8(a_in);
  Plan p = plan_reduce(a, dims, keepdim, op);
  check_nonempty_reduction(p, op);
  Tensor out = run_reduce(is_max ? ReduceOp::Max : ReduceOp::Min, p, a.dtype(), 0);
  if (a_in.dtype() == DType::Bool) return out.to(DType::Bool);
  if (autograd::any_requires_grad({a})) {
    SavedTensor sx(a), so(out);
    autograd::record(is_max ? "AmaxBackward" : "AminBackward", {a}, {out},
                     [sx, so, rs = p.shape()](const Grads& g, const Needs&) -> Grads {
                       Tensor x = sx.get();
                       Tensor o = spread(so.get(), rs);
                       Tensor count = sum(grad_kernel(ReduceGradOp::EqMask, x, o, Tensor(), 0), rs.rd, true);
                       Tensor share = spread(div(g[0].reshape(rs.kept), count), rs);
                       return {grad_kernel(ReduceGradOp::EqScale, x, o, share, 0)};
                     });
  }
  return out;
}

std::pair<Tensor, Tensor> extreme_dim(const Tensor& a_in, int64_t dim, bool keepdim, bool is_max, const char* op) {
  const Tensor a = bool_as_uint8(a_in);
  Plan p = plan_reduce(a, {dim}, keepdim, op);
  check_nonempty_reduction(p, op);
  Tensor values = empty(p.out_shape, a.options());
  Tensor indices = empty(p.out_shape, {DType::Int64, a.device()});
  arg_reduce_stub(a.device())(is_max ? ArgReduceOp::Max : ArgReduceOp::Min, values, indices, p.view, p.nred);
  if (a_in.dtype() == DType::Bool) return {values.to(DType::Bool), indices};
  if (autograd::any_requires_grad({a})) {
    SavedTensor si(indices);
    const auto arc = split_at(p.in_shape, p.rd.empty() ? 0 : p.rd[0]);
    autograd::record(is_max ? "MaxBackward" : "MinBackward", {a}, {values},
                     [si, rs = p.shape(), arc](const Grads& g, const Needs&) -> Grads {
                       Tensor gk = g[0].reshape({arc[0], arc[2]}).contiguous();
                       Tensor idx = si.get().reshape({arc[0], arc[2]}).contiguous();
                       Tensor gi = empty({arc[0], arc[1], arc[2]}, g[0].options());
                       index_grad_stub(gi.device())(gi, gk, idx);
                       return {gi.view(rs.in_shape)};
                     });
  }
  return {values, indices};
}

Tensor arg_extreme(const Tensor& a_in, std::optional<int64_t> dim, bool keepdim, bool is_max, const char* op) {
  // 16-bit values (autocast's logits) widen exactly and keep their order: no 16-bit kernel needed.
  const bool half = a_in.defined() && (a_in.dtype() == DType::Float16 || a_in.dtype() == DType::BFloat16);
  const Tensor a = half ? a_in.detach().to(DType::Float32) : bool_as_uint8(a_in);
  Plan p = dim ? plan_reduce(a, {*dim}, keepdim, op) : plan_reduce(a, {}, false, op);
  check_nonempty_reduction(p, op);
  Tensor indices = empty(p.out_shape, {DType::Int64, a.device()});
  arg_reduce_stub(a.device())(is_max ? ArgReduceOp::Max : ArgReduceOp::Min, Tensor(), indices, p.view, p.nred);
  return indices;
}

Tensor variance(const Tensor& a, std::vector<int64_t> dims, bool unbiased, bool keepdim, bool take_sqrt) {
  const char* op = take_sqrt ? "std" : "var";
  check_defined(a, op);
  check_floating(a, op);
  Plan p = plan_reduce(a, dims, keepdim, op);
  const double correction = unbiased ? 1.0 : 0.0;
  Tensor out = run_reduce(take_sqrt ? ReduceOp::Std : ReduceOp::Var, p, a.dtype(), correction);
  if (autograd::any_requires_grad({a})) {
    SavedTensor sx(a), so(out);
    const double denom = std::max(0.0, static_cast<double>(p.R) - correction);
    autograd::record(
        take_sqrt ? "StdBackward" : "VarBackward", {a}, {out},
        [sx, so, rs = p.shape(), denom, take_sqrt](const Grads& g, const Needs&) -> Grads {
          Tensor x = sx.get();
          Tensor mu = mean(x, rs.rd, true);
          Tensor gk = g[0].reshape(rs.kept);
          // d var / dx = 2 (x - mean) / denom; d std / dx = (x - mean) / (denom * std)
          Tensor scale = take_sqrt ? div(gk, mul(so.get().reshape(rs.kept), denom)) : mul(gk, 2.0 / denom);
          return {grad_kernel(ReduceGradOp::CenteredScale, x, mu.expand(rs.in_shape), spread(scale, rs), 0)};
        });
  }
  return out;
}

Tensor softmax_impl(const Tensor& a, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  check_defined(a, op);
  check_floating(a, op);
  dim = wrap_dim(dim, a.dim(), op);
  const auto arc = split_at(a.shape(), a.dim() == 0 ? -1 : dim);
  Tensor in;
  {
    NoGradGuard ng;
    in = a.contiguous();
  }
  Tensor out = empty(a.shape(), a.options());
  softmax_stub(a.device())(log, out.view({arc[0], arc[1], arc[2]}), in.view({arc[0], arc[1], arc[2]}));
  if (autograd::any_requires_grad({a})) {
    SavedTensor so(out);
    Shape shape = a.shape();
    autograd::record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {a}, {out},
                     [so, shape, arc, log](const Grads& g, const Needs&) -> Grads {
                       const Shape v{arc[0], arc[1], arc[2]};
                       Tensor gc = g[0].contiguous();
                       Tensor gi = empty(shape, gc.options());
                       softmax_grad_stub(gi.device())(log, gi.view(v), gc.view(v), so.get().view(v));
                       return {gi};
                     });
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------ sums

Tensor sum(const Tensor& a_in, std::vector<int64_t> dims, bool keepdim) {
  if (auto c = autocast_args(AutocastOp::sum, a_in)) return sum((*c)[0], dims, keepdim);
  check_defined(a_in, "sum");
  const Tensor a = bool_as_uint8(a_in);
  Plan p = plan_reduce(a, dims, keepdim, "sum");
  const DType dt = is_floating(a.dtype()) ? a.dtype() : DType::Int64;
  Tensor out = run_reduce(ReduceOp::Sum, p, dt, 0);
  if (autograd::any_requires_grad({a})) {
    autograd::record("SumBackward", {a}, {out}, [rs = p.shape()](const Grads& g, const Needs&) -> Grads {
      return {spread(g[0], rs).contiguous()};
    });
  }
  return out;
}

Tensor mean(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  if (auto c = autocast_args(AutocastOp::mean, a)) return mean((*c)[0], dims, keepdim);
  check_defined(a, "mean");
  check_floating(a, "mean");
  Plan p = plan_reduce(a, dims, keepdim, "mean");
  Tensor out = run_reduce(ReduceOp::Mean, p, a.dtype(), 0);
  if (autograd::any_requires_grad({a})) {
    const double scale = 1.0 / static_cast<double>(p.R);
    autograd::record("MeanBackward", {a}, {out}, [rs = p.shape(), scale](const Grads& g, const Needs&) -> Grads {
      return {spread(mul(g[0], scale), rs).contiguous()};
    });
  }
  return out;
}

Tensor prod(const Tensor& a_in, int64_t dim, bool keepdim) {
  check_defined(a_in, "prod");
  const Tensor a = bool_as_uint8(a_in);
  Plan p = plan_reduce(a, {dim}, keepdim, "prod");
  const DType dt = is_floating(a.dtype()) ? a.dtype() : DType::Int64;
  Tensor out = run_reduce(ReduceOp::Prod, p, dt, 0);
  if (autograd::any_requires_grad({a})) {
    SavedTensor sx(a);
    const auto arc = split_at(p.in_shape, p.rd.empty() ? 0 : p.rd[0]);
    autograd::record("ProdBackward", {a}, {out}, [sx, rs = p.shape(), arc](const Grads& g, const Needs&) -> Grads {
      Tensor x = sx.get().contiguous().view({arc[0], arc[1], arc[2]});
      Tensor gk = g[0].reshape({arc[0], arc[2]}).contiguous();
      Tensor gi = empty({arc[0], arc[1], arc[2]}, x.options());
      prod_grad_stub(gi.device())(gi, gk, x);
      return {gi.view(rs.in_shape)};
    });
  }
  return out;
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  check_defined(grad, "sum_to");
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
  // A 16-bit gradient (a bias under autocast) is summed in float32 and rounded once.
  if (grad.dtype() == DType::Float16 || grad.dtype() == DType::BFloat16)
    return sum(grad.to(DType::Float32), dims, true).reshape(shape).to(grad.dtype());
  return sum(grad, dims, true).reshape(shape);
}

// ------------------------------------------------------------------ extremes

Tensor max(const Tensor& a) {
  return extreme(a, {}, false, true, "max");
}
Tensor min(const Tensor& a) {
  return extreme(a, {}, false, false, "min");
}
std::pair<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim(a, dim, keepdim, true, "max");
}
std::pair<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim) {
  return extreme_dim(a, dim, keepdim, false, "min");
}
Tensor amax(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  return extreme(a, dims, keepdim, true, "amax");
}
Tensor amin(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  return extreme(a, dims, keepdim, false, "amin");
}
Tensor argmax(const Tensor& a) {
  return arg_extreme(a, std::nullopt, false, true, "argmax");
}
Tensor argmin(const Tensor& a) {
  return arg_extreme(a, std::nullopt, false, false, "argmin");
}
Tensor argmax(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& a, int64_t dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, false, "argmin");
}

// ------------------------------------------------------------------ statistics

Tensor var(const Tensor& a, std::vector<int64_t> dims, bool unbiased, bool keepdim) {
  if (auto c = autocast_args(AutocastOp::var, a)) return var((*c)[0], dims, unbiased, keepdim);
  return variance(a, std::move(dims), unbiased, keepdim, false);
}
Tensor std(const Tensor& a, std::vector<int64_t> dims, bool unbiased, bool keepdim) {
  if (auto c = autocast_args(AutocastOp::std, a)) return std((*c)[0], dims, unbiased, keepdim);
  return variance(a, std::move(dims), unbiased, keepdim, true);
}

Tensor logsumexp(const Tensor& a_in, std::vector<int64_t> dims, bool keepdim) {
  if (auto c = autocast_args(AutocastOp::logsumexp, a_in)) return logsumexp((*c)[0], dims, keepdim);
  check_defined(a_in, "logsumexp");
  Tensor a = a_in;
  if (!is_floating(a.dtype())) {
    NoGradGuard ng;
    a = a.to(DType::Float32);  // as PyTorch: integer inputs give a float result
  }
  check_floating(a, "logsumexp");
  Plan p = plan_reduce(a, dims, keepdim, "logsumexp");
  // The kernel wants a contiguous [A, R, C]: a view when the reduced dims are one block of a
  // contiguous tensor (size-1 dims aside), else the permuted view made contiguous.
  int64_t first = -1, last = -1;
  for (int64_t d : p.rd)
    if (a.shape()[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  bool block = a.is_contiguous();
  for (int64_t d = first; block && first >= 0 && d <= last; ++d)
    block = a.shape()[d] == 1 || std::binary_search(p.rd.begin(), p.rd.end(), d);
  Tensor in3;
  {
    NoGradGuard ng;
    if (block) {
      std::array<int64_t, 3> arc{1, 1, 1};
      for (int64_t d = 0; d < a.dim(); ++d) arc[first < 0 || d < first ? 0 : d <= last ? 1 : 2] *= a.shape()[d];
      in3 = a.view({arc[0], arc[1], arc[2]});
    } else {
      in3 = p.view.contiguous().view({numel_of(p.kept), p.R, 1});
    }
  }
  Tensor out = empty(p.out_shape, a.options());
  logsumexp_stub(a.device())(out, in3);
  if (autograd::any_requires_grad({a})) {
    SavedTensor sx(a), so(out);
    autograd::record("LogsumexpBackward", {a}, {out}, [sx, so, rs = p.shape()](const Grads& g, const Needs&) -> Grads {
      return {grad_kernel(ReduceGradOp::ExpScale, sx.get(), spread(so.get(), rs), spread(g[0], rs), 0)};
    });
  }
  return out;
}

Tensor norm(const Tensor& a, double pval, std::vector<int64_t> dims, bool keepdim) {
  if (auto c = autocast_args(AutocastOp::norm, a)) return norm((*c)[0], pval, dims, keepdim);
  check_defined(a, "norm");
  check_floating(a, "norm");
  EMBER_CHECK(pval > 0, "norm: p must be positive or inf, got ", pval);
  Plan p = plan_reduce(a, dims, keepdim, "norm");
  Tensor out = run_reduce(ReduceOp::Norm, p, a.dtype(), pval);
  if (autograd::any_requires_grad({a})) {
    SavedTensor sx(a), so(out);
    autograd::record("NormBackward", {a}, {out}, [sx, so, rs = p.shape(), pval](const Grads& g, const Needs&) -> Grads {
      Tensor x = sx.get();
      Tensor o = spread(so.get(), rs);
      if (std::isinf(pval)) {
        // Like amax of |x|: shared evenly among the elements of largest magnitude.
        Tensor count = sum(grad_kernel(ReduceGradOp::AbsEqMask, x, o, Tensor(), 0), rs.rd, true);
        Tensor share = spread(div(g[0].reshape(rs.kept), count), rs);
        return {grad_kernel(ReduceGradOp::AbsEqSignScale, x, o, share, 0)};
      }
      return {grad_kernel(ReduceGradOp::NormScale, x, o, spread(g[0], rs), pval)};
    });
  }
  return out;
}

// ------------------------------------------------------------------ softmax

Tensor softmax(const Tensor& a, int64_t dim) {
  if (auto c = autocast_args(AutocastOp::softmax, a)) return softmax((*c)[0], dim);
  return softmax_impl(a, dim, false);
}
Tensor log_softmax(const Tensor& a, int64_t dim) {
  if (auto c = autocast_args(AutocastOp::log_softmax, a)) return log_softmax((*c)[0], dim);
  return softmax_impl(a, dim, true);
}

// ------------------------------------------------------------------ Tensor methods

Tensor Tensor::max() const {
  return ember::max(*this);
}
Tensor Tensor::min() const {
  return ember::min(*this);
}
Tensor Tensor::argmax(int64_t dim, bool keepdim) const {
  return ember::argmax(*this, dim, keepdim);
}
Tensor Tensor::softmax(int64_t dim) const {
  return ember::softmax(*this, dim);
}
Tensor Tensor::log_softmax(int64_t dim) const {
  return ember::log_softmax(*this, dim);
}

}  // namespace ember
