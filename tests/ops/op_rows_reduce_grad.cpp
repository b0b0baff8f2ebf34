// Rows: the reduction-backward kernels (core/reduce_kernels.h, called directly on the backend's
// device): every ReduceGradOp over the broadcast (expanded) operands the op layer passes and over
// the same operands materialised (the contiguous, vectorised path no op takes), on data with ties
// of the maxima, zeros, an all-zero column (a zero norm) and an all -inf logsumexp column (where the
// formulas special-case them); max/min's index placement; and prod's exclusive products with
// zero, one and two zeros per product, by columns (the CPU's multiplication order: bit for bit)
// and by rows (the block scan), with the exact zeros shown apart from the values. In each row's own
// dtype. These rows took over tests/emu's reduction-backward checks.
#include <cmath>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/reduce_kernels.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

OpRow kernel_row(std::string name, std::function<Inputs(Generator&)> inputs, std::function<Tensor(const Inputs&)> f,
                 double tol) {
  OpRow r{std::move(name), std::move(inputs), std::move(f), tol, false, false, false};
  r.cross_reference = true;
  return r;
}

double tol_of(DType dt) {
  return dt == DType::Float32 ? 1e-6 : 1e-13;
}

// x [5, 7, 3] with exact ties of the column maxima, zeros and the all-zero column (2, :, 1).
Tensor grad_input(Generator& g, DType dt) {
  std::vector<double> v = randn({5, 7, 3}, {.dtype = DType::Float64}, &g).to_vector<double>();
  for (size_t i = 0; i < v.size(); i += 4) v[i] = std::round(v[i]);
  for (int64_t r = 0; r < 7; ++r) v[static_cast<size_t>((2 * 7 + r) * 3 + 1)] = 0.0;
  return from_vector<double>(v, {5, 7, 3}).to(dt);
}

// A reduction's backward kernel op, with how its reduced value a is made from the input.
struct Op {
  const char* name;
  ReduceGradOp op;
  double p;
  // a, from x, of keep shape [5, 1, 3] (b is the row's second input).
  std::function<Tensor(const Tensor& x)> a;
  bool uses_b;
};

// Every backward kernel op, with the inputs that reach its edge cases.
const std::vector<Op>& reduce_grad_ops() {
  static const std::vector<Op> v = {
      {"eq_mask", ReduceGradOp::EqMask, 0, [](const Tensor& x) { return amax(x, {1}, true); }, false},
      {"abs_eq_mask", ReduceGradOp::AbsEqMask, 0, [](const Tensor& x) { return amax(abs(x), {1}, true); }, false},
      {"eq_scale", ReduceGradOp::EqScale, 0, [](const Tensor& x) { return amax(x, {1}, true); }, true},
      {"abs_eq_sign_scale", ReduceGradOp::AbsEqSignScale, 0, [](const Tensor& x) { return amax(abs(x), {1}, true); },
       true},
      {"centered_scale", ReduceGradOp::CenteredScale, 0, [](const Tensor& x) { return mean(x, {1}, true); }, true},
      // logsumexp of a column that is all -inf is -inf: its gradient is 0, not NaN.
      {"exp_scale_minus_inf_column", ReduceGradOp::ExpScale, 0,
       [](const Tensor& x) {
         Tensor column4 = zeros({15}, {.dtype = DType::Bool});
         column4.narrow(0, 4, 1).fill_(1.0);
         return masked_fill(logsumexp(x, {1}, true), column4.view({5, 1, 3}).to(x.device()), -INFINITY);
       },
       true},
      // The all-zero column's norm is zero.
      {"norm_scale_p1", ReduceGradOp::NormScale, 1.0, [](const Tensor& x) { return norm(x, 1.0, {1}, true); }, true},
      {"norm_scale_p2", ReduceGradOp::NormScale, 2.0, [](const Tensor& x) { return norm(x, 2.0, {1}, true); }, true},
      {"norm_scale_p3_5", ReduceGradOp::NormScale, 3.5, [](const Tensor& x) { return norm(x, 3.5, {1}, true); }, true},
  };
  return v;
}

}  // namespace

void add_reduce_grad_rows(std::vector<OpRow>& t) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Op& op : reduce_grad_ops()) {
      t.push_back(kernel_row(
          std::string("reduce_grad_kernel_") + op.name + "_" + dtype_name(dt),
          [dt](Generator& g) {
            return Inputs{grad_input(g, dt), randn({5, 1, 3}, {.dtype = dt}, &g)};
          },
          [op](const Inputs& in) {
            NoGradGuard ng;
            const Tensor x = in[0].detach();
            const Tensor a = op.a(x), b = op.uses_b ? in[1].detach() : a;
            const Shape s = x.shape();
            const Tensor expanded = empty(s, x.options()), materialised = empty(s, x.options());
            reduce_grad_stub(x.device())(op.op, expanded, x, a.expand(s), b.expand(s), op.p);
            reduce_grad_stub(x.device())(op.op, materialised, x, a.expand(s).contiguous(), b.expand(s).contiguous(),
                                         op.p);
            return cat({expanded.reshape({-1}), materialised.reshape({-1})}, 0);
          },
          tol_of(dt)));
    }
    for (const Shape& s : {Shape{3, 7, 5}, Shape{4, 9, 1}, Shape{1, 300, 2}}) {
      t.push_back(kernel_row(
          std::string("index_grad_kernel_") + dtype_name(dt) + "_" + std::to_string(s[0]) + "x" + std::to_string(s[1]) +
              "x" + std::to_string(s[2]),
          [dt, s](Generator& g) {
            return Inputs{randn({s[0], s[2]}, {.dtype = dt}, &g), ints(g, 0, s[1], {s[0], s[2]})};
          },
          [s](const Inputs& in) {
            const Tensor out = empty(s, in[0].options());
            index_grad_stub(out.device())(out, in[0].detach(), in[1]);
            return out;
          },
          0.0));
    }
    // [.., R, 1] with R >= 64 takes the block-per-row scan (300: two tiles of 256, 70: one of 96);
    // the column kernel multiplies in the CPU's order.
    struct ProdCase {
      Shape s;
      bool same_order;
    };
    for (const ProdCase& c : {ProdCase{{3, 9, 5}, true}, ProdCase{{2, 40, 1}, true}, ProdCase{{3, 300, 1}, false},
                              ProdCase{{2, 70, 1}, false}}) {
      t.push_back(kernel_row(
          std::string("prod_grad_kernel_") + dtype_name(dt) + "_" + std::to_string(c.s[0]) + "x" +
              std::to_string(c.s[1]) + "x" + std::to_string(c.s[2]),
          [dt, c](Generator& g) {
            const int64_t R = c.s[1], C = c.s[2];
            // Factors near 1 (long products stay finite); product (0, ., 0) has one zero, (1, ., 0)
            // two, the others none.
            std::vector<double> v = rand(c.s, {.dtype = DType::Float64}, &g).to_vector<double>();
            for (double& e : v) e = 0.9 + 0.2 * e;
            v[static_cast<size_t>((0 * R + R / 3) * C)] = 0.0;
            v[static_cast<size_t>((1 * R + 1) * C)] = 0.0;
            v[static_cast<size_t>((1 * R + R - 2) * C)] = 0.0;
            return Inputs{from_vector<double>(v, c.s).to(dt), randn({c.s[0], C}, {.dtype = dt}, &g)};
          },
          [c](const Inputs& in) {
            NoGradGuard ng;
            const Tensor out = empty(c.s, in[0].options());
            prod_grad_stub(out.device())(out, in[1].detach(), in[0].detach());
            // Exactly zero where the rest of the product holds a zero, whatever the tolerance.
            return cat({out.reshape({-1}), eq(out, 0.0).to(out.dtype()).reshape({-1})}, 0);
          },
          c.same_order ? 0.0 : tol_of(dt) * 10));
    }
  }
}

}  // namespace ember::ops_test
