#include "core/ops/elementwise.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/elementwise_kernels.h"
#include "core/ops/creation.h"
#include "core/ops/reduce.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  EMBER_CHECK(a.defined() && b.defined(), op, ": undefined tensor argument");
  EMBER_CHECK(a.device() == b.device(), op, ": tensors are on different devices (", a.device(), " and ", b.device(),
              ")");
}

Tensor expand_to(const Tensor& t, const Shape& shape, DType dt) {
  NoGradGuard ng;
  Tensor r = t.dtype() == dt ? t : t.to(dt);
  return r.shape() == shape ? r : r.expand(shape);
}

// Runs a binary kernel with broadcasting and promotion; no autograd.
Tensor binary_raw(BinaryOp op, const Tensor& a, const Tensor& b, double alpha, const char* name) {
  check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const DType dt = promote_types(a.dtype(), b.dtype());
  Tensor out = empty(shape, {dt, a.device()});
  binary_stub(a.device())(op, out, expand_to(a, shape, dt), expand_to(b, shape, dt), alpha);
  return out;
}

Tensor scalar_like(double v, const Tensor& t) {
  return full({}, v, {t.dtype(), t.device()});
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  Tensor out = binary_raw(BinaryOp::Add, a, b, alpha, "add");
  Shape sa = a.shape(), sb = b.shape();
  autograd::record("AddBackward", {a, b}, {out}, [sa, sb, alpha](const Grads& g, const Needs& n) -> Grads {
    Grads r(2);
    if (n[0]) r[0] = sum_to(g[0], sa);
    if (n[1]) r[1] = sum_to(alpha == 1.0 ? g[0] : mul(g[0], alpha), sb);
    return r;
  });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  return add(a, b, -alpha);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::Mul, a, b, 1.0, "mul");
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    Shape sha = a.shape(), shb = b.shape();
    autograd::record("MulBackward", {a, b}, {out}, [sa, sb, sha, shb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      if (n[0]) r[0] = sum_to(mul(g[0], sb.get()), sha);
      if (n[1]) r[1] = sum_to(mul(g[0], sa.get()), shb);
      return r;
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::Div, a, b, 1.0, "div");
  if (autograd::any_requires_grad({a, b})) {
    SavedTensor sa(a), sb(b);
    Shape sha = a.shape(), shb = b.shape();
    autograd::record("DivBackward", {a, b}, {out}, [sa, sb, sha, shb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      Tensor bv = sb.get();
      if (n[0]) r[0] = sum_to(div(g[0], bv), sha);
      if (n[1]) r[1] = sum_to(neg(div(mul(g[0], sa.get()), mul(bv, bv))), shb);
      return r;
    });
  }
  return out;
}

Tensor add(const Tensor& a, double b) {
  return add(a, scalar_like(b, a));
}
Tensor sub(const Tensor& a, double b) {
  return add(a, scalar_like(-b, a));
}
Tensor mul(const Tensor& a, double b) {
  return mul(a, scalar_like(b, a));
}
Tensor div(const Tensor& a, double b) {
  return mul(a, scalar_like(1.0 / b, a));
}
Tensor rsub(const Tensor& a, double b) {
  return sub(scalar_like(b, a), a);
}

Tensor neg(const Tensor& a) {
  Tensor out = empty(a.shape(), a.options());
  unary_stub(a.device())(UnaryOp::Neg, out, a, 0, 0);
  autograd::record("NegBackward", {a}, {out}, [](const Grads& g, const Needs&) -> Grads { return {neg(g[0])}; });
  return out;
}

// ------------------------------------------------------------ in place

namespace {

Tensor& binary_inplace(BinaryOp op, Tensor& a, const Tensor& b, double alpha, const char* name) {
  check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  EMBER_CHECK(shape == a.shape(), name, ": the result shape ", shape_str(shape),
              " does not match the in-place tensor's ", shape_str(a.shape()));
  const bool track = autograd::any_requires_grad({a, b});
  if (track) autograd::check_inplace(a, name);
  SavedTensor sa_old, sb;
  if (track && (op == BinaryOp::Mul || op == BinaryOp::Div)) {
    sb = SavedTensor(b);
    if (op == BinaryOp::Mul) {
      NoGradGuard ng;
      sa_old = SavedTensor(a.clone());
    }
  }
  binary_stub(a.device())(op, a, a, expand_to(b, shape, a.dtype()), alpha);
  a.bump_version();
  if (track) {
    Shape shb = b.shape();
    SavedTensor sout;
    if (op == BinaryOp::Div) sout = SavedTensor(a.detach());
    autograd::record_inplace(name, a, {b}, [op, alpha, sa_old, sb, sout, shb](const Grads& g, const Needs& n) -> Grads {
      Grads r(2);
      switch (op) {
        case BinaryOp::Add:
        case BinaryOp::Sub: {
          const double s = op == BinaryOp::Add ? alpha : -alpha;
          if (n[0]) r[0] = g[0];
          if (n[1]) r[1] = sum_to(s == 1.0 ? g[0] : mul(g[0], s), shb);
          break;
        }
        case BinaryOp::Mul:
          if (n[0]) r[0] = mul(g[0], sb.get());
          if (n[1]) r[1] = sum_to(mul(g[0], sa_old.get()), shb);
          break;
        case BinaryOp::Div:
          if (n[0]) r[0] = div(g[0], sb.get());
          if (n[1]) r[1] = sum_to(neg(div(mul(g[0], sout.get()), sb.get())), shb);
          break;
      }
      return r;
    });
  }
  return a;
}

}  // namespace

Tensor& add_(Tensor& a, const Tensor& b, double alpha) {
  return binary_inplace(BinaryOp::Add, a, b, alpha, "add_");
}
Tensor& sub_(Tensor& a, const Tensor& b, double alpha) {
  return binary_inplace(BinaryOp::Sub, a, b, alpha, "sub_");
}
Tensor& mul_(Tensor& a, const Tensor& b) {
  return binary_inplace(BinaryOp::Mul, a, b, 1.0, "mul_");
}
Tensor& div_(Tensor& a, const Tensor& b) {
  return binary_inplace(BinaryOp::Div, a, b, 1.0, "div_");
}
Tensor& add_(Tensor& a, double b) {
  return add_(a, scalar_like(b, a));
}
Tensor& mul_(Tensor& a, double b) {
  return mul_(a, scalar_like(b, a));
}

// ------------------------------------------------------------ operators

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator+(const Tensor& a, double b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, double b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, double b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, double b) {
  return div(a, b);
}
Tensor operator+(double a, const Tensor& b) {
  return add(b, a);
}
Tensor operator-(double a, const Tensor& b) {
  return rsub(b, a);
}
Tensor operator*(double a, const Tensor& b) {
  return mul(b, a);
}
Tensor operator/(double a, const Tensor& b) {
  return div(scalar_like(a, b), b);
}
Tensor operator-(const Tensor& a) {
  return neg(a);
}

}  // namespace ember
