// Kernel interface for reductions, arg-reductions, softmax and the backward helpers they need.
// The op layer (core/ops/reduce.cpp) checks arguments and hands every kernel a view whose
// layout it describes below; a device backend registers one function per stub. Reductions take
// the input as a view with the reduced dims moved last (a permutation, never a copy), so a
// kernel sees any strides and picks its own strategy: row reductions for contiguous reduced
// dims, column accumulation when the kept dims are the contiguous ones.
#pragma once

#include "core/dispatch.h"
#include "core/tensor.h"

namespace ember {

enum class ReduceOp {
  Sum,   // float -> same dtype (accumulated in double); integers -> int64
  Mean,  // floating only; empty -> nan
  Prod,  // float -> same dtype; integers -> int64
  Max,   // same dtype; NaN propagates; the op layer refuses empty reductions
  Min,
  Norm,  // floating only; p in (0, inf]
  Var,   // floating only; p = the correction (0 or 1); fewer than correction + 1 values -> nan
  Std,
};

// The op's user-facing name, for error messages from either backend.
inline const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Max:
      return "amax";
    case ReduceOp::Min:
      return "amin";
    case ReduceOp::Norm:
      return "norm";
    case ReduceOp::Var:
      return "var";
    case ReduceOp::Std:
      return "std";
  }
  return "reduce";
}

// in: the reduced dims are its last `nred` dims (any strides); out: contiguous, one element per
// index of the leading dims, in their row-major order.
using ReduceFn = void(ReduceOp op, const Tensor& out, const Tensor& in, int64_t nred, double p);
EMBER_DECLARE_STUB(reduce_stub, ReduceFn);

enum class ArgReduceOp { Max, Min };

// Like ReduceFn; writes the row-major flat index within the reduced dims of the first extreme
// element (the first NaN when there is one) to `indices` (int64) and, when `values` is defined,
// the extreme value. The reduced size must be nonzero.
using ArgReduceFn = void(ArgReduceOp op, const Tensor& values, const Tensor& indices, const Tensor& in, int64_t nred);
EMBER_DECLARE_STUB(arg_reduce_stub, ArgReduceFn);

// Elementwise helpers for reduction backwards. x, a, b are broadcast to grad_in's shape
// (a and b are usually a keepdim result expanded back); all share x's floating dtype.
enum class ReduceGradOp {
  EqMask,          // grad_in = x == a ? 1 : 0
  AbsEqMask,       // grad_in = |x| == a ? 1 : 0
  EqScale,         // grad_in = x == a ? b : 0
  AbsEqSignScale,  // grad_in = |x| == a ? sign(x) * b : 0
  CenteredScale,   // grad_in = b * (x - a)
  ExpScale,        // grad_in = b * exp(x - a)  (0 where a is -inf)
  NormScale,       // grad_in = b * sign(x) * (|x| / a)^(p - 1)  (0 where x or a is 0)
};
using ReduceGradFn = void(ReduceGradOp op, const Tensor& grad_in, const Tensor& x, const Tensor& a, const Tensor& b,
                          double p);
EMBER_DECLARE_STUB(reduce_grad_stub, ReduceGradFn);

// All contiguous; x and grad_in are [A, R, C], g and indices are [A, C].
// grad_in[a, r, c] = r == indices[a, c] ? g[a, c] : 0
using IndexGradFn = void(const Tensor& grad_in, const Tensor& g, const Tensor& indices);
EMBER_DECLARE_STUB(index_grad_stub, IndexGradFn);
// grad_in[a, r, c] = g[a, c] * prod over r' != r of x[a, r', c]  (exact with zeros)
using ProdGradFn = void(const Tensor& grad_in, const Tensor& g, const Tensor& x);
EMBER_DECLARE_STUB(prod_grad_stub, ProdGradFn);

// Softmax family over the middle dim of a contiguous [A, R, C] view (C == 1: the last dim).
// out and in have that shape; `log` selects log_softmax.
using SoftmaxFn = void(bool log, const Tensor& out, const Tensor& in);
EMBER_DECLARE_STUB(softmax_stub, SoftmaxFn);
// grad_in from grad_out and the forward output, all contiguous [A, R, C]:
// softmax: y * (g - sum_r g * y); log_softmax: g - exp(y) * sum_r g.
using SoftmaxGradFn = void(bool log, const Tensor& grad_in, const Tensor& grad_out, const Tensor& out);
EMBER_DECLARE_STUB(softmax_grad_stub, SoftmaxGradFn);
// out[a, c] = log sum_r exp(in[a, r, c]), stable; in contiguous [A, R, C], out contiguous [A, C].
using LogSumExpFn = void(const Tensor& out, const Tensor& in);
EMBER_DECLARE_STUB(logsumexp_stub, LogSumExpFn);

}  // namespace ember
