// The CUDA reductions (core/cuda/reduce.cu) run by the kernel emulator against the CPU kernels,
// for what no op asks of them (the op table, tests/ops/op_rows_reductions.cpp, runs every op,
// dtype and layout through the ops): a product over several dims at once (prod takes one dim),
// argmax/argmin over several dims at once (they take one dim or all), and the kernels' own
// errors, in all three thread orders.
#include <gtest/gtest.h>

#include <cmath>
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

// A tensor of `shape`, permuted by `perm` so that the last `nred` dims are the reduced ones (as
// the op layer hands it to the kernel).
struct Case {
  std::string name;
  Shape shape;
  std::vector<int64_t> perm;
  int64_t nred;
};
std::vector<Case> several_dims() {
  return {
      {"two_dims", {4, 6, 5, 7}, {0, 2, 1, 3}, 2},
      {"all", {3, 5, 11}, {0, 1, 2}, 3},
      {"long_two_dims", {2, 90, 3, 100}, {0, 2, 1, 3}, 2},  // non-mergeable reduced dims
  };
}

Tensor sample(Shape shape, DType dt) {
  if (is_floating(dt)) return (rand(shape, {.dtype = DType::Float64}) * 0.2 + 0.9).to(dt);  // products stay finite
  if (dt == DType::UInt8) return randint(1, 3, shape, {.dtype = dt});  // 1 and 2 (the products wrap, as on the CPU)
  return (randint(0, 2, shape, {.dtype = dt}) * 2 - 1).to(dt);         // -1 and 1 (no zero)
}

Shape out_shape(const Tensor& v, int64_t nred) {
  return Shape(v.shape().begin(), v.shape().end() - nred);
}

}  // namespace

TEST_P(Reduce, ProductOverSeveralDimsMatchesTheCpu) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    for (const Case& c : several_dims()) {
      if (!is_floating(dt) && c.name == "long_two_dims") continue;  // integer products of 9000 factors wrap
      Tensor x = sample(c.shape, dt);
      Tensor v = x.permute(c.perm), vd = device_copy(x).permute(c.perm);
      const DType out_dt = is_floating(dt) ? dt : DType::Int64;
      Tensor want = empty(out_shape(v, c.nred), {.dtype = out_dt});
      reduce_stub(Device::cpu())(ReduceOp::Prod, want, v, c.nred, 0);
      Tensor got = device_empty(out_shape(v, c.nred), out_dt);
      emu::kernel(reduce_stub)(ReduceOp::Prod, got, vd, c.nred, 0);
      const double rtol = dt == DType::Float32 ? 1e-5 : dt == DType::Float64 ? 1e-11 : 0.0;
      expect_close(got, want, rtol, rtol, std::string(dtype_name(dt)) + " " + c.name);
    }
  }
}

TEST_P(Reduce, ArgMaxArgMinOverSeveralDimsMatchTheCpuWithTiesAndNaN) {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::UInt8}) {
    for (const Case& c : several_dims()) {
      // Few distinct values: ties everywhere, so "the first extreme" matters.
      Tensor x = randint(0, 4, c.shape, {.dtype = dt});
      if (dt == DType::Float32) x.data_ptr<float>()[30] = NAN;
      Tensor v = x.permute(c.perm), vd = device_copy(x).permute(c.perm);
      for (ArgReduceOp op : {ArgReduceOp::Max, ArgReduceOp::Min}) {
        for (bool with_values : {true, false}) {
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
  Tensor x = device_copy(randint(-5, 6, {3, 4}, {.dtype = DType::Int32}));
  Tensor out = device_empty({3}, DType::Int32);
  test_util::expect_error([&] { emu::kernel(reduce_stub)(ReduceOp::Mean, out, x, 1, 0); }, "mean", "floating-point");
  Tensor e = device_empty({3, 0}, DType::Float32);
  Tensor idx = device_empty({3}, DType::Int64);
  test_util::expect_error([&] { emu::kernel(arg_reduce_stub)(ArgReduceOp::Max, Tensor(), idx, e, 1); }, "argmax",
                          "nonzero");
}

INSTANTIATE_TEST_SUITE_P(AllOrders, Reduce, testing::ValuesIn(emu_test::all_orders()), emu_test::order_name);
