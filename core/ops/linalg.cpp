#include "core/ops/linalg.h"

#include <algorithm>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/gemm_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/reduce.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

namespace {

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  EMBER_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  EMBER_CHECK(a.device() == b.device(), op, ": tensors are on different devices (", a.device(), " and ", b.device(),
              ")");
  // float16/bfloat16: what autocast runs them in (on the CPU, core/cpu/lowp_reference.h).
  for (const Tensor* t : {&a, &b})
    EMBER_CHECK(t->dtype() == DType::Float32 || t->dtype() == DType::Float64 || t->dtype() == DType::Float16 ||
                    t->dtype() == DType::BFloat16,
                op, ": dtype ", dtype_name(t->dtype()),
                " is not supported (expected float32, float64, float16 or bfloat16)");
  EMBER_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, got ",
              dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

std::string shapes_msg(const Tensor& a, const Tensor& b) {
  return shape_str(a.shape()) + " and " + shape_str(b.shape());
}

// How the last two dims of a tensor can be handed to BLAS without a copy: row-major with leading
// dimension `ld`, or (trans) the transpose of a row-major matrix, which is what a transposed view
// of a contiguous tensor is.
struct BlasLayout {
  bool trans = false;
  int64_t ld = 1;
};

std::optional<BlasLayout> blas_layout(const Tensor& t) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const int64_t s0 = t.stride(-2), s1 = t.stride(-1);
  if ((c == 1 || s1 == 1) && (r == 1 || s0 >= std::max<int64_t>(1, c)))
    return BlasLayout{false, r == 1 ? std::max<int64_t>(1, c) : s0};
  if ((r == 1 || s0 == 1) && (c == 1 || s1 >= std::max<int64_t>(1, r)))
    return BlasLayout{true, c == 1 ? std::max<int64_t>(1, r) : s1};
  return std::nullopt;
}

// The tensor itself when BLAS can read it as it is, else a contiguous copy.
Tensor blas_ready(const Tensor& t, BlasLayout& lay) {
  if (auto l = blas_layout(t)) {
    lay = *l;
    return t;
  }
  Tensor c = t.contiguous();
  lay = *blas_layout(c);
  return c;
}

Shape batch_of(const Tensor& t) {
  return Shape(t.shape().begin(), t.shape().end() - 2);
}

// Whether the batch dims of a (row-major, rows ld apart) continue its row stride, so that its
// batch is n * batch rows of one tall matrix.
bool batch_continues_rows(const Tensor& a, const BlasLayout& la, int64_t n) {
  int64_t expected = la.ld * n;
  for (int64_t d = a.dim() - 3; d >= 0; --d) {
    if (a.size(d) == 1) continue;
    if (a.stride(d) != expected) return false;
    expected *= a.size(d);
  }
  return true;
}

// Per batch dim of c other than 1: size and the element strides of a, b, c (0 where an operand is
// broadcast), with neighbours that step evenly in all three merged into one.
std::vector<std::array<int64_t, 4>> coalesced_batch_dims(const Tensor& a, const Tensor& b, const Tensor& c) {
  const Shape batch = batch_of(c);
  const int64_t nb = static_cast<int64_t>(batch.size());
  auto bstride = [&](const Tensor& t, int64_t i) -> int64_t {
    const int64_t j = i - (nb - (t.dim() - 2));
    return j < 0 || t.size(j) == 1 ? 0 : t.stride(j);
  };
  std::vector<std::array<int64_t, 4>> dims;  // size, sa, sb, sc
  for (int64_t i = 0; i < nb; ++i)
    if (batch[i] != 1) dims.push_back({batch[i], bstride(a, i), bstride(b, i), c.stride(i)});
  for (int64_t d = static_cast<int64_t>(dims.size()) - 2; d >= 0; --d) {
    auto& o = dims[d];
    const auto& in = dims[d + 1];
    if (o[1] == in[1] * in[0] && o[2] == in[2] * in[0] && o[3] == in[3] * in[0]) {
      o = {o[0] * in[0], in[1], in[2], in[3]};
      dims.erase(dims.begin() + d + 1);
    }
  }
  return dims;
}

// c = alpha * a·b + beta * c, where a is [..., n, k], b is [..., k, m] and c is a contiguous
// [batch..., n, m] with batch the broadcast of both batch shapes. No autograd.
void gemm_into(const Tensor& c, const Tensor& a_in, const Tensor& b_in, double alpha, double beta) {
  NoGradGuard ng;
  const int64_t n = a_in.size(-2), k = a_in.size(-1), m = b_in.size(-1);
  if (c.numel() == 0) return;
  if (k == 0) {
    Tensor cc = c;
    if (beta == 0.0)
      cc.zero_();
    else
      mul_(cc, beta);
    return;
  }
  BlasLayout la, lb;
  Tensor a = blas_ready(a_in, la), b = blas_ready(b_in, lb);
  const size_t isz = c.itemsize();

  GemmArgs g;
  g.dtype = c.dtype();
  g.trans_a = la.trans;
  g.trans_b = lb.trans;
  g.m = n;
  g.n = m;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = a.raw_data();
  g.lda = la.ld;
  g.b = b.raw_data();
  g.ldb = lb.ld;
  g.c = c.raw_data();
  g.ldc = m;

  // A batch of row-major a against one b is one tall GEMM when a's batch dims continue its row
  // stride (a linear layer on [batch, seq, features], and the weight gradient of one).
  if (numel_of(batch_of(b)) == 1 && !la.trans && batch_continues_rows(a, la, n)) {
    g.m = n * numel_of(batch_of(a));
    gemm_stub(c.device())(g);
    return;
  }

  std::vector<std::array<int64_t, 4>> dims = coalesced_batch_dims(a, b, c);
  if (dims.empty()) {
    gemm_stub(c.device())(g);
    return;
  }
  // The innermost (coalesced) batch dim goes to the batched kernel; any others are walked here.
  const auto last = dims.back();
  dims.pop_back();
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t outer = 1;
  for (const auto& d : dims) outer *= d[0];
  auto* pa = static_cast<const char*>(a.raw_data());
  auto* pb = static_cast<const char*>(b.raw_data());
  auto* pc = static_cast<char*>(c.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = 0, ob = 0, oc = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      oa += idx[d] * dims[d][1];
      ob += idx[d] * dims[d][2];
      oc += idx[d] * dims[d][3];
    }
    GemmArgs gi = g;
    gi.a = pa + oa * static_cast<int64_t>(isz);
    gi.b = pb + ob * static_cast<int64_t>(isz);
    gi.c = pc + oc * static_cast<int64_t>(isz);
    gemm_batched_stub(c.device())(gi, last[0], last[1], last[2], last[3]);
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d][0]) break;
      idx[d] = 0;
    }
  }
}

// alpha * a·b for a [..., n, k] and b [..., k, m] (both at least 2-D), batch dims broadcast.
Tensor matmul_nd(const Tensor& a, const Tensor& b, const char* op, double alpha = 1.0) {
  EMBER_CHECK(a.size(-1) == b.size(-2), op, ": shapes ", shapes_msg(a, b), " cannot be multiplied (", a.size(-1),
              " != ", b.size(-2), ")");
  Shape shape = broadcast_shapes(batch_of(a), batch_of(b), op);
  shape.push_back(a.size(-2));
  shape.push_back(b.size(-1));
  Tensor out = empty(shape, a.options());
  gemm_into(out, a, b, alpha, 0.0);
  return out;
}

// sum_to(x·y, target) without forming the broadcast product where a single GEMM can do the
// reduction: when the target has no batch and x, y share one batch B, the sum over B of x_b·y_b
// is [rows, B*inner]·[B*inner, cols].
Tensor matmul_sum_to(const Tensor& x, const Tensor& y, const Shape& target, double alpha) {
  NoGradGuard ng;
  const Shape bx = batch_of(x), by = batch_of(y);
  const Shape batch = broadcast_shapes(bx, by, "matmul backward");
  const Shape tb(target.begin(), target.end() - 2);
  const int64_t bn = numel_of(batch);
  if (numel_of(tb) == bn) return matmul_nd(x, y, "matmul backward", alpha).reshape(target);
  if (numel_of(tb) == 1 && bx == batch && by == batch && bn > 0) {
    const int64_t rows = x.size(-2), inner = x.size(-1), cols = y.size(-1);
    std::vector<int64_t> perm{x.dim() - 2};
    for (int64_t d = 0; d < x.dim() - 2; ++d) perm.push_back(d);
    perm.push_back(x.dim() - 1);
    Tensor xf = x.permute(perm).reshape({rows, bn * inner});
    Tensor yf = y.reshape({bn * inner, cols});
    return matmul_nd(xf, yf, "matmul backward", alpha).reshape(target);
  }
  return sum_to(matmul_nd(x, y, "matmul backward", alpha), target);
}

Tensor mT(const Tensor& t) {
  return t.transpose(-1, -2);
}

// A matrix stored column-major: the transposed view of a contiguous one, as linear's weight.t().
bool column_major(const Tensor& t) {
  return t.dim() == 2 && t.size(0) > 1 && t.size(1) > 1 && t.stride(0) == 1 && t.stride(1) == t.size(0);
}

// The gradients of x and y in x·y (2-D), each formed in its operand's layout, as PyTorch's
// mm_mat2_backward does: for a column-major operand, the transpose of the contiguous product of
// the transposes. The transposing view's backward then hands the parameter under it a contiguous
// gradient, which is accumulated with one vectorised add per micro-batch or step, not a strided
// one with a cache miss per element (4x the time of the whole backward at 32 rows per
// micro-batch in bench/pipeline).
Tensor lhs_grad(const Tensor& g, const Tensor& x, const Tensor& y, double alpha, const char* op) {
  return column_major(x) ? matmul_nd(y, mT(g), op, alpha).t() : matmul_nd(g, mT(y), op, alpha);
}
Tensor rhs_grad(const Tensor& g, const Tensor& x, const Tensor& y, double alpha, const char* op) {
  return column_major(y) ? matmul_nd(mT(g), x, op, alpha).t() : matmul_nd(mT(x), g, op, alpha);
}

Tensor dot_impl(const Tensor& a, const Tensor& b, const char* op) {
  check_operands(a, b, op);
  EMBER_CHECK(a.dim() == 1 && b.dim() == 1, op, ": expected two 1-D tensors, got shapes ", shapes_msg(a, b));
  EMBER_CHECK(a.size(0) == b.size(0), op, ": vectors of sizes ", a.size(0), " and ", b.size(0),
              " cannot be multiplied (", a.size(0), " != ", b.size(0), ")");
  Tensor out = empty({}, a.options());
  const int64_t n = a.size(0);
  if (n == 0) {
    out.zero_();
  } else {
    NoGradGuard ng;
    // A stride-0 (expanded) vector is legal BLAS for some implementations only.
    Tensor x = a.stride(0) >= 1 || n == 1 ? a : a.contiguous();
    Tensor y = b.stride(0) >= 1 || n == 1 ? b : b.contiguous();
    dot_stub(a.device())(a.dtype(), n, x.raw_data(), std::max<int64_t>(1, x.stride(0)), y.raw_data(),
                         std::max<int64_t>(1, y.stride(0)), out.raw_data());
  }
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    autograd::record("DotBackward", {a, b}, {out}, [sa, sb](const Grads& g, const Needs& need) -> Grads {
      Grads r(2);
      if (need[0]) r[0] = mul(g[0], sb.get());
      if (need[1]) r[1] = mul(g[0], sa.get());
      return r;
    });
  }
  return out;
}

// NumPy matmul on checked operands of rank >= 1 (1-D·1-D excluded), recorded as one node.
Tensor matmul_impl(const Tensor& a, const Tensor& b, const char* op) {
  const bool va = a.dim() == 1, vb = b.dim() == 1;
  Tensor out;
  {
    NoGradGuard ng;
    Tensor a2 = va ? a.unsqueeze(0) : a, b2 = vb ? b.unsqueeze(1) : b;
    if (a2.size(-1) != b2.size(-2))
      EMBER_FAIL(op, ": shapes ", shapes_msg(a, b), " cannot be multiplied (", a2.size(-1), " != ", b2.size(-2), ")");
    Shape nd = broadcast_shapes(batch_of(a2), batch_of(b2), op);
    Shape s = nd;  // the result drops the dims that 1-D operands were promoted with
    nd.push_back(a2.size(-2));
    nd.push_back(b2.size(-1));
    if (!va) s.push_back(a2.size(-2));
    if (!vb) s.push_back(b2.size(-1));
    out = empty(s, a.options());
    gemm_into(out.view(nd), a2, b2, 1.0, 0.0);
  }
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    autograd::record("MatmulBackward", {a, b}, {out}, [sa, sb, va, vb](const Grads& g, const Needs& need) -> Grads {
      Tensor a = sa.get(), b = sb.get();
      Tensor a2 = va ? a.unsqueeze(0) : a, b2 = vb ? b.unsqueeze(1) : b;
      Tensor g2 = g[0];
      if (va) g2 = g2.unsqueeze(vb ? -1 : -2);
      if (vb) g2 = g2.unsqueeze(-1);
      Grads r(2);
      const bool plain = a2.dim() == 2 && b2.dim() == 2;  // mm: each gradient in its operand's layout
      if (need[0])
        r[0] = (plain ? lhs_grad(g2, a2, b2, 1.0, "matmul backward") : matmul_sum_to(g2, mT(b2), a2.shape(), 1.0))
                   .reshape(a.shape());
      if (need[1])
        r[1] = (plain ? rhs_grad(g2, a2, b2, 1.0, "matmul backward") : matmul_sum_to(mT(a2), g2, b2.shape(), 1.0))
                   .reshape(b.shape());
      return r;
    });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  if (auto c = autocast_args(AutocastOp::matmul, a, b)) return matmul((*c)[0], (*c)[1]);
  check_operands(a, b, "matmul");
  EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dim, got shapes ",
              shapes_msg(a, b));
  if (a.dim() == 1 && b.dim() == 1) return dot_impl(a, b, "matmul");
  return matmul_impl(a, b, "matmul");
}

Tensor mm(const Tensor& a, const Tensor& b) {
  if (auto c = autocast_args(AutocastOp::mm, a, b)) return mm((*c)[0], (*c)[1]);
  check_operands(a, b, "mm");
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected two 2-D tensors, got shapes ", shapes_msg(a, b));
  return matmul_impl(a, b, "mm");
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  if (auto c = autocast_args(AutocastOp::bmm, a, b)) return bmm((*c)[0], (*c)[1]);
  check_operands(a, b, "bmm");
  EMBER_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected two 3-D tensors, got shapes ", shapes_msg(a, b));
  EMBER_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ in shapes ", shapes_msg(a, b), " (", a.size(0),
              " != ", b.size(0), ")");
  return matmul_impl(a, b, "bmm");
}

Tensor addmm(const Tensor& bias, const Tensor& a, const Tensor& b, double beta, double alpha) {
  if (auto c = autocast_args(AutocastOp::addmm, bias, a, b)) return addmm((*c)[0], (*c)[1], (*c)[2], beta, alpha);
  check_operands(a, b, "addmm");
  EMBER_CHECK(bias.defined(), "addmm: undefined bias");
  EMBER_CHECK(bias.device() == a.device(), "addmm: bias is on ", bias.device(), " but the matrices are on ",
              a.device());
  EMBER_CHECK(bias.dtype() == a.dtype(), "addmm: bias dtype ", dtype_name(bias.dtype()), " differs from the matrices' ",
              dtype_name(a.dtype()));
  EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: expected two 2-D matrices, got shapes ", shapes_msg(a, b));
  EMBER_CHECK(a.size(1) == b.size(0), "addmm: shapes ", shapes_msg(a, b), " cannot be multiplied (", a.size(1),
              " != ", b.size(0), ")");
  const Shape out_shape{a.size(0), b.size(1)};
  bool fits = bias.dim() <= 2;
  for (int64_t i = 1; fits && i <= bias.dim(); ++i) fits = bias.size(-i) == 1 || bias.size(-i) == out_shape[2 - i];
  EMBER_CHECK(fits, "addmm: bias of shape ", shape_str(bias.shape()), " cannot be broadcast to the product's shape ",
              shape_str(out_shape));
  Tensor out = empty(out_shape, a.options());
  {
    NoGradGuard ng;
    if (beta != 0.0) out.copy_(bias);
    gemm_into(out, a, b, alpha, beta);
  }
  if (autograd::any_requires_grad({bias, a, b})) {
    SavedTensor sa(a), sb(b);
    Shape bias_shape = bias.shape();
    autograd::record("AddmmBackward", {bias, a, b}, {out},
                     [sa, sb, bias_shape, beta, alpha](const Grads& g, const Needs& need) -> Grads {
                       Grads r(3);
                       if (need[0]) {
                         Tensor gb = sum_to(g[0], bias_shape);
                         r[0] = beta == 1.0 ? gb : mul(gb, beta);
                       }
                       if (need[1]) r[1] = lhs_grad(g[0], sa.get(), sb.get(), alpha, "addmm backward");
                       if (need[2]) r[2] = rhs_grad(g[0], sa.get(), sb.get(), alpha, "addmm backward");
                       return r;
                     });
  }
  return out;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "outer");
  EMBER_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected two 1-D tensors, got shapes ", shapes_msg(a, b));
  Tensor out;
  {
    NoGradGuard ng;
    out = matmul_nd(a.unsqueeze(1), b.unsqueeze(0), "outer");
  }
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    autograd::record("OuterBackward", {a, b}, {out}, [sa, sb](const Grads& g, const Needs& need) -> Grads {
      Grads r(2);
      if (need[0]) r[0] = matmul_nd(g[0], sb.get().unsqueeze(1), "outer backward").view({-1});
      if (need[1]) r[1] = matmul_nd(g[0].t(), sa.get().unsqueeze(1), "outer backward").view({-1});
      return r;
    });
  }
  return out;
}

Tensor dot(const Tensor& a, const Tensor& b) {
  return dot_impl(a, b, "dot");
}

Tensor Tensor::matmul(const Tensor& o) const {
  return ember::matmul(*this, o);
}

Tensor Tensor::mm(const Tensor& o) const {
  return ember::mm(*this, o);
}

}  // namespace ember
