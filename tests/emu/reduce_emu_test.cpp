// The CUDA reductions (core/cuda/reduce.cu) run by the kernel emulator against the CPU kernels:
// every ReduceOp and argmax/argmin, float and integer dtypes, row layouts (reduced dims
// contiguous) and column layouts (reduced dim strided), the two-stage path for few long rows
// (full reductions), several dims at once, sizes that are not
// multiples of the block or warp size, empty reductions, ties and NaN, in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/reduce_kernels.h"
#include "emu/emu_test_util.h"
#include "test_helpers.h"

using namespace ember;
using emu_test::device_copy;
using emu_test::device_empty;
using emu_test::expect_close;

namespace {

class Reduce : public emu_test::EmulatedKernel {};

// A reduction case: a tensor of `shape`, permuted by `perm` so that the last `nred` dims are the
// reduced ones (as the op layer hands it to the kernel).
struct Case {
  std::string name;
  Shape shape;
  std::vector<int64_t> perm;
  int64_t nred;
};

std::vector<Case> cases() {
  return {
      {"row_37", {3, 37}, {0, 1}, 1},
      {"row_300", {2, 300}, {0, 1}, 1},
      {"row_1", {5, 1}, {0, 1}, 1},
      {"column_40x70", {70, 40}, {1, 0}, 1},  // reduce dim 0 of [70, 40]: column layout
      {"column_few_outputs", {9, 5}, {1, 0}, 1},
      {"two_dims", {4, 6, 5, 7}, {0, 2, 1, 3}, 2},
      {"all", {3, 5, 11}, {0, 1, 2}, 3},
      {"empty", {3, 0}, {0, 1}, 1},
      // Few outputs over long rows: the two-stage reduction (slices of each row, then their
      // partials in order; reduce.cu's row_slices).
      {"long_full", {12000}, {0}, 1},
      {"long_rows", {3, 9001}, {0, 1}, 1},
      {"long_strided", {9001, 2}, {1, 0}, 1},               // reduced dim strided, too few outputs for columns
      {"long_two_dims", {2, 90, 3, 100}, {0, 2, 1, 3}, 2},  // non-mergeable reduced dims
  };
}

Tensor sample(Shape shape, DType dt) {
  if (is_floating(dt)) return (rand(shape, {.dtype = DType::Float64}) * 4.0 - 2.0).to(dt);
  return randint(dt == DType::UInt8 ? 0 : -5, 6, shape, {.dtype = dt});
}

Shape out_shape(const Tensor& v, int64_t nred) {
  return Shape(v.shape().begin(), v.shape().end() - nred);
}

}  // namespace

TEST_P(Reduce, EveryOpMatchesTheCpu) {
  struct OpCase {
    ReduceOp op;
    double p;
    bool ints;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<OpCase> ops = {
      {ReduceOp::Sum, 0, true},     {ReduceOp::Mean, 0, false}, {ReduceOp::Prod, 0, true},
      {ReduceOp::Max, 0, true},     {ReduceOp::Min, 0, true},   {ReduceOp::Norm, 1, false},
      {ReduceOp::Norm, 2, false},   {ReduceOp::Norm, 3, false}, {ReduceOp::Norm, inf, false},
      {ReduceOp::Norm, 0.5, false}, {ReduceOp::Var, 1, false},  {ReduceOp::Var, 0, false},
      {ReduceOp::Std, 1, false}};
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    for (const Case& c : cases()) {
      // Integer dtypes share the float kernels' layouts: a subset of the layouts covers them.
      if (!is_floating(dt) && (c.name == "row_300" || c.name == "row_1" || c.name == "all" ||
                               (c.name.rfind("long", 0) == 0 && c.name != "long_full")))
        continue;
      Tensor x = sample(c.shape, dt);
      Tensor xd = device_copy(x);
      Tensor v = x.permute(c.perm), vd = xd.permute(c.perm);
      for (const OpCase& o : ops) {
        if (!is_floating(dt) && !o.ints) continue;
        const bool empty_red = x.numel() == 0;
        if (empty_red && (o.op == ReduceOp::Max || o.op == ReduceOp::Min || o.op == ReduceOp::Norm)) continue;
        // Overflows to inf/underflows/wraps: not informative.
        if (o.op == ReduceOp::Prod && (c.name == "row_300" || c.name.rfind("long", 0) == 0)) continue;
        const DType out_dt = !is_floating(dt) && (o.op == ReduceOp::Sum || o.op == ReduceOp::Prod) ? DType::Int64 : dt;
        Tensor want = empty(out_shape(v, c.nred), {.dtype = out_dt});
        reduce_stub(Device::cpu())(o.op, want, v, c.nred, o.p);
        Tensor got = device_empty(out_shape(v, c.nred), out_dt);
        emu::kernel(reduce_stub)(o.op, got, vd, c.nred, o.p);
        const double rtol = dt == DType::Float32 ? 1e-5 : 1e-11;
        expect_close(got, want, is_floating(dt) ? rtol : 0.0, is_floating(dt) ? rtol : 0.0,
                     std::string(dtype_name(dt)) + " " + c.name + " op " + std::to_string(static_cast<int>(o.op)) +
                         " p " + std::to_string(o.p));
      }
    }
  }
}

TEST_P(Reduce, MaxMinPropagateNaN) {
  Tensor x = sample({4, 50}, DType::Float32);
  float* p = x.data_ptr<float>();
  p[7] = NAN;            // row 0
  p[2 * 50 + 49] = NAN;  // row 2, last element
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    Tensor want = empty({4});
    reduce_stub(Device::cpu())(op, want, x, 1, 0);
    Tensor got = device_empty({4}, DType::Float32);
    emu::kernel(reduce_stub)(op, got, device_copy(x), 1, 0);
    expect_close(got, want, 0, 0, "nan");
    EXPECT_TRUE(std::isnan(got.to_vector<float>()[0]));
  }
}

TEST_P(Reduce, ArgMaxArgMinMatchTheCpuWithTiesAndNaN) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::UInt8}) {
    for (const Case& c : cases()) {
      if (c.name == "empty") continue;
      // Few distinct values: ties everywhere, so "the first extreme" matters.
      Tensor x = randint(0, 4, c.shape, {.dtype = dt});
      if (dt == DType::Float32 && x.numel() > 40) x.data_ptr<float>()[30] = NAN;
      Tensor v = x.permute(c.perm), vd = device_copy(x).permute(c.perm);
      for (ArgReduceOp op : {ArgReduceOp::Max, ArgReduceOp::Min}) {
        for (bool with_values : {true, false}) {
          if (!with_values && dt != DType::Float32) continue;
          const Shape os = out_shape(v, c.nred);
          Tensor want_i = empty(os, {.dtype = DType::Int64}), want_v = empty(os, {.dtype = dt});
          arg_reduce_stub(Device::cpu())(op, want_v, want_i, v, c.nred);
          Tensor got_i = device_empty(os, DType::Int64);
          Tensor got_v = with_values ? device_empty(os, dt) : Tensor();
          emu::kernel(arg_reduce_stub)(op, got_v, got_i, vd, c.nred);
          const std::string what =
              std::string(dtype_name(dt)) + " " + c.name + (op == ArgReduceOp::Max ? " argmax" : " argmin");
          expect_close(got_i, want_i, 0, 0, what + " indices");
          if (with_values) expect_close(got_v, want_v, 0, 0, what + " values");
        }
      }
    }
  }
}

TEST(ReduceErrors, IntegerMeanAndEmptyArgmaxAreRefused) {
  Tensor x = device_copy(sample({3, 4}, DType::Int32));
  Tensor out = device_empty({3}, DType::Int32);
  test_util::expect_error([&] { emu::kernel(reduce_stub)(ReduceOp::Mean, out, x, 1, 0); }, "mean", "floating-point");
  Tensor e = device_empty({3, 0}, DType::Float32);
  Tensor idx = device_empty({3}, DType::Int64);
  test_util::expect_error([&] { emu::kernel(arg_reduce_stub)(ArgReduceOp::Max, Tensor(), idx, e, 1); }, "argmax",
                          "nonzero");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Reduce, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
