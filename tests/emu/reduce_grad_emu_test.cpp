// The CUDA reduction-backward kernels (core/cuda/reduce_grad.cu) run by the kernel emulator
// against the CPU kernels: every ReduceGradOp over broadcast (expanded) and contiguous operands
// with ties, zeros and -inf where the formulas special-case them; max/min's index placement; and
// prod's exclusive products with zero, one and two zeros per product, by columns (the CPU's
// multiplication order, so bit for bit) and by rows (the block scan), in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/reduce_kernels.h"
#include "emu/emu_test_util.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class ReduceGrad : public emu_test::EmulatedKernel {};

double rtol_for(DType dt) {
  return dt == DType::Float32 ? 1e-6 : 1e-14;
}

// x [5, 7, 3] with exact ties of the column maxima, zeros and one all-zero column.
Tensor grad_input(DType dt, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> v = randn({5, 7, 3}, {.dtype = DType::Float64}, &gen).to_vector<double>();
  for (size_t i = 0; i < v.size(); i += 4) v[i] = std::round(v[i]);  // ties, and some zeros
  for (int64_t r = 0; r < 7; ++r) v[(2 * 7 + r) * 3 + 1] = 0.0;      // column (2, :, 1) is zero
  return from_vector<double>(v, {5, 7, 3}).to(dt);
}

// Sets element i of a keep-shaped [5, 1, 3] tensor.
Tensor with(const Tensor& t, int64_t i, double value) {
  std::vector<double> v = t.to_vector<double>();
  v[static_cast<size_t>(i)] = value;
  return from_vector<double>(v, t.shape()).to(t.dtype());
}

void check_op(ReduceGradOp op, const Tensor& x, const Tensor& a_keep, const Tensor& b_keep, double p,
              const std::string& what) {
  const Shape s = x.shape();
  // Broadcast operands as the op layer passes them, and the same operands materialised (the
  // contiguous, vectorised path).
  for (bool expanded : {true, false}) {
    const Tensor a = a_keep.expand(s), b = b_keep.expand(s);
    Tensor want = empty(s, {.dtype = x.dtype()});
    reduce_grad_stub(Device::cpu())(op, want, x, a, b, p);
    Tensor got = device_empty(s, x.dtype());
    if (expanded)
      emu::kernel(reduce_grad_stub)(op, got, device_copy(x), device_copy(a_keep).expand(s),
                                    device_copy(b_keep).expand(s), p);
    else
      emu::kernel(reduce_grad_stub)(op, got, device_copy(x), device_copy(a), device_copy(b), p);
    expect_close(got, want, rtol_for(x.dtype()), 0,
                 what + (expanded ? " expanded " : " contiguous ") + dtype_name(x.dtype()));
  }
}

}  // namespace

TEST_P(ReduceGrad, EveryOpMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    const Tensor x = grad_input(dt, 4);
    Generator gen(9);
    const Tensor b = randn({5, 1, 3}, {.dtype = dt}, &gen);
    const Tensor mx = amax(x, {1}, true), amx = amax(abs(x), {1}, true);
    check_op(ReduceGradOp::EqMask, x, mx, mx, 0, "EqMask");
    check_op(ReduceGradOp::AbsEqMask, x, amx, amx, 0, "AbsEqMask");
    check_op(ReduceGradOp::EqScale, x, mx, b, 0, "EqScale");
    check_op(ReduceGradOp::AbsEqSignScale, x, amx, b, 0, "AbsEqSignScale");
    check_op(ReduceGradOp::CenteredScale, x, mean(x, {1}, true), b, 0, "CenteredScale");
    // logsumexp of a column that is all -inf is -inf: its gradient is 0, not NaN.
    check_op(ReduceGradOp::ExpScale, x, with(logsumexp(x, {1}, true), 4, -INFINITY), b, 0, "ExpScale");
    for (double p : {1.0, 2.0, 3.5}) {
      const Tensor nrm = norm(x, p, {1}, true);  // zero for the all-zero column
      check_op(ReduceGradOp::NormScale, x, nrm, b, p, "NormScale p " + std::to_string(p));
    }
  }
}

TEST_P(ReduceGrad, IndexGradPlacesEachGradientAtItsIndex) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Shape& s : {Shape{3, 7, 5}, Shape{4, 9, 1}, Shape{1, 300, 2}}) {
      Generator gen(17);
      const Tensor g = randn({s[0], s[2]}, {.dtype = dt}, &gen);
      const Tensor idx = randint(0, s[1], {s[0], s[2]}, {.dtype = DType::Int64}, &gen);
      Tensor want = empty(s, {.dtype = dt});
      index_grad_stub(Device::cpu())(want, g, idx);
      Tensor got = device_empty(s, dt);
      emu::kernel(index_grad_stub)(got, device_copy(g), device_copy(idx));
      expect_close(got, want, 0, 0, shape_str(s) + " " + dtype_name(dt));
    }
  }
}

TEST_P(ReduceGrad, ProdGradIsExactWithZerosLikeTheCpu) {
  struct Case {
    Shape s;
    bool same_order;  // the column kernel multiplies in the CPU's order
  };
  // [.., R, 1] with R >= 64 takes the block-per-row scan (300: two tiles of 256, 70: one of 96).
  for (const Case& c :
       {Case{{3, 9, 5}, true}, Case{{2, 40, 1}, true}, Case{{3, 300, 1}, false}, Case{{2, 70, 1}, false}}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      const int64_t A = c.s[0], R = c.s[1], C = c.s[2];
      Generator gen(23);
      // Factors near 1 (long products stay finite); product (0, ., 0) has one zero, (1, ., 0) two,
      // the others none.
      std::vector<double> v = rand(c.s, {.dtype = DType::Float64}, &gen).to_vector<double>();
      for (double& e : v) e = 0.9 + 0.2 * e;
      v[(0 * R + R / 3) * C] = 0.0;
      v[(1 * R + 1) * C] = 0.0;
      v[(1 * R + R - 2) * C] = 0.0;
      const Tensor x = from_vector<double>(v, c.s).to(dt);
      ASSERT_GT(A, 1);
      const Tensor g = randn({A, C}, {.dtype = dt}, &gen);
      Tensor want = empty(c.s, {.dtype = dt});
      prod_grad_stub(Device::cpu())(want, g, x);
      Tensor got = device_empty(c.s, dt);
      emu::kernel(prod_grad_stub)(got, device_copy(g), device_copy(x));
      const std::string what = shape_str(c.s) + " " + dtype_name(dt);
      expect_close(got, want, c.same_order ? 0 : rtol_for(dt) * 10, 0, what);
      // Exactly zero where the rest of the product holds a zero.
      const std::vector<double> gv = got.to_vector<double>();
      EXPECT_NE(gv[(0 * R + R / 3) * C], 0.0) << what << ": the only zero's gradient";
      for (int64_t r = 0; r < R; ++r) {
        if (r != R / 3) {
          EXPECT_EQ(gv[(0 * R + r) * C], 0.0) << what << " r " << r;
        }
        EXPECT_EQ(gv[(1 * R + r) * C], 0.0) << what << " r " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOrders, ReduceGrad, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
