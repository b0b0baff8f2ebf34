// The GPU label: CUDA graphs of a training step (core/step_graph.h) on a real device. A captured
// forward + loss + backward, replayed with the optimizer after it, trains the same parameters as
// the eager loop; what the capture allocated keeps its address and is handed to no one else; a
// host wait or a random draw inside the step is refused and leaves the device usable. Part of
// ember_gpu_tests (its main is in gpu_ops_test.cpp); every test skips without a GPU. Never run on
// hardware yet: written for the lent machine's gpu-check.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/ops.h"
#include "core/ops/autocast.h"
#include "core/step_graph.h"
#include "layers/functional.h"
#include "layers/linear.h"
#include "layers/optim/grad_scaler.h"
#include "layers/optim/sgd.h"
#include "test_helpers.h"

using namespace ember;
using test_util::error_of;
using test_util::has;

namespace {

const Device kGpu = Device::cuda(0);

#define SKIP_WITHOUT_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device"

struct Model {
  std::unique_ptr<nn::Linear> net;
  std::unique_ptr<optim::SGD> opt;
  Model() {
    manual_seed(5);
    net = std::make_unique<nn::Linear>(16, 4);
    net->to(kGpu);
    opt = std::make_unique<optim::SGD>(net->parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  }
  Tensor loss(const Tensor& x, const Tensor& y) { return nn::mse_loss(net->forward(x), y); }
};

}  // namespace

TEST(GpuStepGraph, ReplayTrainsAsTheEagerLoop) {
  SKIP_WITHOUT_GPU();
  Model eager, graphed;
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(randn({8, 16}, {.device = kGpu}));
    ys.push_back(randn({8, 4}, {.device = kGpu}));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    Tensor l = eager.loss(xs[i], ys[i]);
    eager.opt->zero_grad();
    l.backward();
    eager.opt->step();
  }
  Tensor x = zeros({8, 16}, {.device = kGpu}), y = zeros({8, 4}, {.device = kGpu}), loss;
  graphed.opt->zero_grad();
  auto graph = capture_step_graph(kGpu, [&] {
    loss = graphed.loss(x, y);
    loss.backward();
  });
  EXPECT_GT(graph->recorded_nodes(), 0u);
  for (size_t i = 0; i < xs.size(); ++i) {
    x.copy_(xs[i]);
    y.copy_(ys[i]);
    graph->replay();
    graphed.opt->step();
  }
  const std::vector<Tensor> a = eager.net->parameters(), b = graphed.net->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LT(max(abs(a[i].cpu() - b[i].cpu())).item<float>(), 1e-5f) << "parameter " << i;
}

// float16 with loss scaling under a graph (--cuda-graph --precision fp16): the capture's backward
// starts from the loss times the GradScaler's scale, which update() changes in place on the device,
// so a replay after an overflow (step 2's inputs are huge: float16 gradients overflow, the step is
// skipped and the scale halved) computes with the new scale; the skip and the update after each
// replay never wait on the host. Parameters as the eager loop's.
TEST(GpuStepGraph, Float16WithLossScalingReplaysAsTheEagerLoop) {
  SKIP_WITHOUT_GPU();
  Model eager, graphed;
  optim::GradScaler eager_scaler, graph_scaler;
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 6; ++i) {
    xs.push_back(mul(randn({8, 16}, {.device = kGpu}), i == 2 ? 6e4 : 1.0));
    ys.push_back(randn({8, 4}, {.device = kGpu}));
  }
  auto scaled_backward = [](Model& m, optim::GradScaler& sc, const Tensor& x, const Tensor& y) {
    Tensor loss;
    {
      autocast ac(kGpu, DType::Float16);
      loss = m.loss(x, y);
    }
    sc.scale(loss).backward();
  };
  for (size_t i = 0; i < xs.size(); ++i) {
    eager.opt->zero_grad();
    scaled_backward(eager, eager_scaler, xs[i], ys[i]);
    eager_scaler.step(*eager.opt);
    eager_scaler.update();
  }
  // One eager step first, as --cuda-graph's warm-up: it puts the scale on the device.
  graphed.opt->zero_grad();
  scaled_backward(graphed, graph_scaler, xs[0], ys[0]);
  graph_scaler.step(*graphed.opt);
  graph_scaler.update();
  Tensor x = zeros({8, 16}, {.device = kGpu}), y = zeros({8, 4}, {.device = kGpu});
  graphed.opt->zero_grad();
  auto graph = capture_step_graph(kGpu, [&] { scaled_backward(graphed, graph_scaler, x, y); });
  for (size_t i = 1; i < xs.size(); ++i) {
    x.copy_(xs[i]);
    y.copy_(ys[i]);
    graph->replay();
    graph_scaler.step(*graphed.opt);
    graph_scaler.update();
  }
  EXPECT_EQ(graph_scaler.get_scale(), eager_scaler.get_scale());
  EXPECT_EQ(graph_scaler.get_scale(), 32768.0) << "step 2 overflowed: the scale halved once";
  const std::vector<Tensor> a = eager.net->parameters(), b = graphed.net->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_LT(max(abs(a[i].cpu() - b[i].cpu())).item<float>(), 1e-4f) << "parameter " << i;
}

TEST(GpuStepGraph, CapturedTensorsKeepTheirAddressAndAreNotShared) {
  SKIP_WITHOUT_GPU();
  Model m;
  Tensor x = randn({8, 16}, {.device = kGpu}), y = randn({8, 4}, {.device = kGpu}), loss;
  m.opt->zero_grad();
  auto graph = capture_step_graph(kGpu, [&] {
    loss = m.loss(x, y);
    loss.backward();
  });
  void* const at = loss.raw_data();
  std::set<void*> others;
  std::vector<Tensor> keep;
  for (int i = 0; i < 64; ++i) {
    keep.push_back(empty(loss.shape(), {.device = kGpu}));
    others.insert(keep.back().raw_data());
  }
  EXPECT_EQ(others.count(at), 0u) << "the graph's output block was handed out while the graph lives";
  graph->replay();
  EXPECT_EQ(loss.raw_data(), at);
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
}

TEST(GpuStepGraph, HostWaitAndRandomDrawsAreRefusedAndTheDeviceStaysUsable) {
  SKIP_WITHOUT_GPU();
  Tensor t = ones({4}, {.device = kGpu});
  std::string e = error_of([&] { (void)capture_step_graph(kGpu, [&] { (void)sum(t).item<float>(); }); });
  EXPECT_TRUE(has(e, "inside the step being captured")) << e;
  e = error_of([&] { (void)capture_step_graph(kGpu, [&] { (void)randn({4}, {.device = kGpu}); }); });
  EXPECT_TRUE(has(e, "draws random numbers")) << e;
  EXPECT_EQ(sum(t * 2.0).item<float>(), 8.0f) << "the device is not usable after a refused capture";
}
