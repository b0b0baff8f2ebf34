// batch_norm and layer_norm: closed-form running statistics after one and two steps, eval mode
// (hand-computed elements; the running statistics left as they were), running statistics that
// are strided views updated in place, empty inputs, layer norm's one autograd node, and every
// argument error. The values for every layout against a composition of other ops, float32 on
// badly centred data, and the finite differences are op-table rows (tests/ops/op_rows_norm.cpp).
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

TEST(BatchNorm, RunningStatisticsAfterOneStepClosedForm) {
  // One channel, values 1..4: mean 2.5, biased var 1.25 (normalisation), unbiased 5/3 (running).
  Tensor x = tensor({1, 2, 3, 4}, {.dtype = DType::Float64}).reshape({4, 1});
  Tensor rm = zeros({1}, {.dtype = DType::Float64}), rv = ones({1}, {.dtype = DType::Float64});
  const uint32_t v0 = rm.version();
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_NEAR(rm.item(), 0.9 * 0 + 0.1 * 2.5, 1e-15);
  EXPECT_NEAR(rv.item(), 0.9 * 1 + 0.1 * 5.0 / 3.0, 1e-15);
  EXPECT_GT(rm.version(), v0);
  EXPECT_FALSE(rm.requires_grad());
  EXPECT_NEAR(vec(y)[0], (1 - 2.5) / std::sqrt(1.25 + 1e-5), 1e-12);
  // A second step with momentum 0.5 keeps blending.
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.5, 1e-5);
  EXPECT_NEAR(rm.item(), 0.5 * 0.25 + 0.5 * 2.5, 1e-15);
}

TEST(BatchNorm, EvalUsesRunningStatisticsAndLeavesThem) {
  Tensor x = randn_t({5, 2, 3}, 4, DType::Float64);
  Tensor rm = tensor({0.5, -1.0}, {.dtype = DType::Float64}), rv = tensor({2.0, 0.25}, {.dtype = DType::Float64});
  Tensor w = tensor({1.5, -0.5}, {.dtype = DType::Float64}), b = tensor({0.1, 0.2}, {.dtype = DType::Float64});
  Tensor y = batch_norm(x, rm, rv, w, b, false);
  std::vector<double> m{0.5, -1.0}, v{2.0, 0.25};
  // x[0, 0, 0] is in channel 0, x[0, 1, 0] in channel 1.
  EXPECT_NEAR(vec(y)[0], (vec(x)[0] - 0.5) / std::sqrt(2.0 + 1e-5) * 1.5 + 0.1, 1e-12);
  EXPECT_NEAR(vec(y)[3], (vec(x)[3] + 1.0) / std::sqrt(0.25 + 1e-5) * -0.5 + 0.2, 1e-12);
  EXPECT_EQ(vec(rm), m);
  EXPECT_EQ(vec(rv), v);
  // Train mode gives a different answer on the same input (batch statistics).
  EXPECT_FALSE(all_close(batch_norm(x, rm.clone(), rv.clone(), w, b, true), vec(y), 1e-6, 1e-6));
}

TEST(BatchNorm, NonContiguousRunningStatisticsAreUpdatedInPlace) {
  Tensor base = zeros({4}, {.dtype = DType::Float64});
  Tensor rm = base.slice(0, 0, 4, 2);  // elements 0 and 2
  Tensor rv = ones({2}, {.dtype = DType::Float64});
  Tensor x = tensor({{1, 10}, {3, 30}}, {.dtype = DType::Float64});
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 1.0);
  EXPECT_EQ(vec(base), (std::vector<double>{2, 0, 20, 0}));
  EXPECT_TRUE(all_close(rv, {2.0, 200.0}, 1e-12, 1e-12));  // unbiased variances
}

TEST(Norms, EmptyInputs) {
  Tensor rm = zeros({3}), rv = ones({3});
  EXPECT_EQ(layer_norm(zeros({0, 4}), {4}).shape(), (Shape{0, 4}));
  EXPECT_EQ(batch_norm(zeros({0, 3}), rm, rv, Tensor(), Tensor(), false).shape(), (Shape{0, 3}));
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({4, 3});
  expect_error([&] { batch_norm(zeros({4}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
               {"batch_norm", "at least 2 dims"});
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), zeros({2}), Tensor(), true); },
               {"batch_norm", "weight must have shape [3]", "[2]"});
  expect_error(
      [&] {
        batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"batch_norm", "more than 1 value per channel"});
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false); },
               {"batch_norm", "needed in eval mode"});
  expect_error([&] { batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), true); }, {"batch_norm", "both be given"});
  expect_error([&] { batch_norm(x, zeros({3}, {.dtype = DType::Float64}), ones({3}), Tensor(), Tensor(), true); },
               {"batch_norm", "running_mean dtype float64"});
  expect_error([&] { batch_norm(x, zeros({3}), ones({3}), Tensor(), Tensor(), true, 1.5); },
               {"batch_norm", "momentum"});
  expect_error(
      [&] {
        batch_norm(zeros({4, 3}, {.dtype = DType::Int64}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"batch_norm", "float32 or float64"});
}

TEST(LayerNorm, OneAutogradNode) {
  Tensor x = randn_t({3, 2, 4}, 15, DType::Float64, true);
  EXPECT_EQ(layer_norm(x, {4}).grad_fn()->name(), "LayerNormBackward");
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3});
  expect_error([&] { layer_norm(x, {4}); }, {"layer_norm", "normalized_shape [4] does not match", "[2, 3]"});
  expect_error([&] { layer_norm(x, {2, 2, 3}); }, {"layer_norm", "does not match"});
  expect_error([&] { layer_norm(x, {}); }, {"layer_norm", "at least one dim"});
  expect_error([&] { layer_norm(x, {3}, zeros({2})); }, {"layer_norm", "weight must have shape [3]"});
  expect_error([&] { layer_norm(x, {3}, Tensor(), zeros({3}, {.dtype = DType::Float64})); },
               {"layer_norm", "bias dtype float64"});
}
