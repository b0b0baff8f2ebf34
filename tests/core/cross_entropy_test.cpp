// cross_entropy: hand-computed values (batched, unbatched, huge logits), the all-ignored mean and
// an empty batch, the fused op's one autograd node, and every argument error. Every option
// (weights, ignore_index, smoothing, reductions, K-dim logits, probability targets) against
// PyTorch's definition composed from other ops, with its gradients, on every backend, and the
// finite differences are op-table rows (tests/ops/op_rows_loss.cpp).
#include "nn_test_util.h"

using namespace ember;
using namespace nn_test;

namespace {

Tensor labels(const std::vector<int64_t>& v, Shape s) {
  return from_vector(v, std::move(s));
}

}  // namespace

TEST(CrossEntropy, HandComputed) {
  Tensor x = tensor({{1, 2, 3}}, {.dtype = DType::Float64});
  Tensor y = cross_entropy(x, labels({2}, {1}));
  EXPECT_NEAR(y.item(), std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-14);
  EXPECT_EQ(y.dim(), 0);
  // Unbatched: [C] logits and a 0-dim target.
  EXPECT_NEAR(cross_entropy(tensor({1, 2, 3}, {.dtype = DType::Float64}), labels({0}, {})).item(),
              2 + std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-14);
  // Huge logits stay finite: log_softmax is computed relative to the max.
  EXPECT_NEAR(cross_entropy(tensor({{1000, 0}}), labels({1}, {1})).item(), 1000.0, 1e-3);
}

TEST(CrossEntropy, OneAutogradNode) {
  Tensor x = randn_t({4, 3}, 5, DType::Float64, true);
  EXPECT_EQ(cross_entropy(x, labels({2, 0, -100, 1}, {4})).grad_fn()->name(), "CrossEntropyBackward");
}

TEST(CrossEntropy, AllIgnoredMeanIsNaNAndEmptyBatch) {
  Tensor x = randn_t({2, 3}, 14, DType::Float64);
  EXPECT_TRUE(std::isnan(cross_entropy(x, labels({-100, -100}, {2})).item()));
  CrossEntropyOptions o;
  o.reduction = Reduction::Sum;
  EXPECT_EQ(cross_entropy(x, labels({-100, -100}, {2}), o).item(), 0.0);
  o.reduction = Reduction::None;
  EXPECT_EQ(cross_entropy(zeros({0, 3}), labels({}, {0}), o).shape(), (Shape{0}));
}

TEST(CrossEntropy, Errors) {
  Tensor x = zeros({2, 10});
  expect_error(
      [&] {
        cross_entropy(x, labels({3, 12}, {2}));
      },
      {"cross_entropy: target 12 is out of range for 10 classes"});
  expect_error([&] { cross_entropy(x, labels({-1, 0}, {2})); }, {"cross_entropy", "target -1", "10 classes"});
  expect_error([&] { cross_entropy(x, labels({1, 2, 3}, {3})); }, {"cross_entropy", "target shape [3]", "[2, 10]"});
  expect_error(
      [&] {
        cross_entropy(x, from_vector(std::vector<int32_t>{1, 2}, {2}));
      },
      {"cross_entropy", "int64", "int32"});
  expect_error([&] { cross_entropy(x, zeros({2, 9})); }, {"cross_entropy", "probability targets", "[2, 10]"});
  expect_error(
      [&] {
        cross_entropy(x, zeros({2, 10}, {.dtype = DType::Float64}));
      },
      {"cross_entropy", "target dtype float64"});
  CrossEntropyOptions o;
  o.ignore_index = 0;
  expect_error([&] { cross_entropy(x, zeros({2, 10}), o); }, {"cross_entropy", "ignore_index"});
  o = {};
  o.weight = ones({9});
  expect_error([&] { cross_entropy(x, labels({1, 2}, {2}), o); }, {"cross_entropy", "weight must have shape [10]"});
  o = {};
  o.label_smoothing = 1.5;
  expect_error([&] { cross_entropy(x, labels({1, 2}, {2}), o); }, {"cross_entropy", "label_smoothing"});
  expect_error([&] { cross_entropy(labels({1, 2}, {2}), labels({1}, {})); }, {"cross_entropy", "float32 or float64"});
  expect_error([&] { cross_entropy(scalar_tensor(1.0), labels({1}, {})); }, {"cross_entropy", "class dim"});
}
