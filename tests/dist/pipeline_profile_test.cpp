// profile_layers (pipeline_plan.h) on a small Sequential: positive times, a Linear's output and
// state bytes exactly, activations at least the output, and the model as it was before (parameters,
// gradients, batch-norm statistics, the default generator). Times are checked to be positive only.
#include <gtest/gtest.h>

#include <iostream>

#include "core/generator.h"
#include "core/ops.h"
#include "dist/pipeline_plan.h"
#include "layers/nn.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::dist;
using test_util::error_of;
using test_util::has;

TEST(PipelineProfile, SmallSequential) {
  manual_seed(7);
  nn::Sequential model;
  model.push_back("fc1", nn::make<nn::Linear>(8, 16));
  model.push_back("bn", nn::make<nn::BatchNorm1d>(16));
  model.push_back("act", nn::make<nn::ReLU>());
  model.push_back("fc2", nn::make<nn::Linear>(16, 4, nn::LinearOptions{.bias = false}));
  const Tensor x = randn({5, 8});
  // A gradient already there (mid-accumulation) must come back as it was; the others stay absent.
  Tensor& w1 = model.at<nn::Linear>(0).weight;
  const Tensor g = full(w1.shape(), 0.25);
  w1.set_grad(g);
  std::vector<std::vector<double>> before;
  for (const Tensor& p : model.parameters()) before.push_back(p.to_vector<double>());
  const auto running_mean = model.at<nn::BatchNorm1d>(1).running_mean.to_vector<double>();
  const GeneratorState gen = default_generator().state();

  const std::vector<LayerCost> costs = profile_layers(model, x, 3, 2);

  ASSERT_EQ(costs.size(), 4u);
  EXPECT_EQ(costs[0].name, "fc1:Linear");
  EXPECT_EQ(costs[3].name, "fc2:Linear");
  for (const LayerCost& c : costs) {
    std::cout << c.name << ": forward " << c.forward_s * 1e6 << " us, backward " << c.backward_s * 1e6
              << " us, activations " << c.activation_bytes << " B, output " << c.output_bytes << " B, state "
              << c.state_bytes << " B\n";
    EXPECT_GT(c.forward_s, 0) << c.name;
    EXPECT_GT(c.backward_s, 0) << c.name;  // every input after the first requires grad
    EXPECT_GE(c.activation_bytes, c.output_bytes) << c.name;
  }
  EXPECT_EQ(costs[0].output_bytes, 5 * 16 * 4);
  EXPECT_EQ(costs[3].output_bytes, 5 * 4 * 4);
  // Parameters, their gradients and Adam's two moments: 4 copies of (8 * 16 + 16) floats.
  EXPECT_EQ(costs[0].state_bytes, (8 * 16 + 16) * 4 * 4);
  EXPECT_EQ(costs[3].state_bytes, 16 * 4 * 4 * 4);
  // Batch norm: weight and bias (trainable), running mean and variance, and the int64 step count.
  EXPECT_EQ(costs[1].state_bytes, 2 * 16 * 4 * 4 + 2 * 16 * 4 + 8);
  EXPECT_EQ(costs[2].state_bytes, 0);

  // The model is as it was.
  const auto params = model.parameters();
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(params[i].to_vector<double>(), before[i]) << "parameter " << i;
  EXPECT_TRUE(w1.grad().is_same(g));
  EXPECT_EQ(g.to_vector<double>(), std::vector<double>(g.numel(), 0.25));
  for (size_t i = 1; i < params.size(); ++i) EXPECT_FALSE(params[i].grad().defined()) << "parameter " << i;
  EXPECT_EQ(model.at<nn::BatchNorm1d>(1).running_mean.to_vector<double>(), running_mean);
  EXPECT_EQ(model.at<nn::BatchNorm1d>(1).num_batches_tracked.item<int64_t>(), 0);
  EXPECT_EQ(default_generator().state().offset, gen.offset);
  EXPECT_FALSE(x.requires_grad());

  // Without an optimizer's state a Linear holds its parameters and their gradients only; and the
  // profile plans.
  EXPECT_EQ(profile_layers(model, x, 1, 0)[0].state_bytes, (8 * 16 + 16) * 4 * 2);
  const PipelinePlan plan = plan_pipeline(costs, {{}, {}}, {});
  EXPECT_EQ(plan.stages.size(), 2u);
  std::cout << plan.table(costs);
}

TEST(PipelineProfile, BadInput) {
  nn::Sequential empty_model;
  EXPECT_TRUE(has(error_of([&] { profile_layers(empty_model, randn({2, 3})); }), "the Sequential has no layers"));
  nn::Sequential model(nn::make<nn::Linear>(3, 2));
  EXPECT_TRUE(has(error_of([&] { profile_layers(model, Tensor()); }), "undefined"));
  EXPECT_TRUE(has(error_of([&] { profile_layers(model, randn({2, 3}), 0); }), "repeats must be at least 1, got 0"));
  EXPECT_TRUE(has(error_of([&] {
                    profile_layers(model, randn({2, 3}), 1, -1);
                  }),
                  "optimizer_bytes_per_parameter_byte"));
  // A layer that fails names itself.
  const std::string msg = error_of([&] { profile_layers(model, randn({2, 5})); });
  EXPECT_TRUE(has(msg, "profile_layers: layer 0 (0:Linear)")) << msg;
  EXPECT_FALSE(model.at<nn::Linear>(0).weight.grad().defined());
}
