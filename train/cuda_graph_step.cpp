#include "train/cuda_graph_step.h"

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "core/step_graph.h"
#include "train/precision.h"

namespace ember::train {

namespace {

constexpr int kWarmupSteps = 3;

struct ClassifierGraph {
  int eager_steps = 0;
  std::unique_ptr<StepGraph> graph;
  Shape x_shape, y_shape;
  Tensor x, y, loss, correct;  // static inputs and outputs: the graph reads and writes them in place
  std::vector<Tensor> params, grads;

  void capture(nn::Module& net, optim::Optimizer& opt, Device dev, const Tensor& xb, const Tensor& yb,
               const CrossEntropyOptions& criterion) {
    x = xb.to(dev).clone();
    y = yb.to(dev).clone();
    x_shape = x.shape();
    y_shape = y.shape();
    opt.zero_grad();  // unset: the capture's backward allocates them in the graph's pool
    graph = capture_step_graph(dev, [&] {
      Tensor logits;
      {
        std::optional<autocast> amp;
        run_precision().enter_autocast(amp, dev);
        logits = net(x);
        loss = cross_entropy(logits, y, criterion);
      }
      // fp16: the loss times the scaler's scale, which the replays read from the device where
      // update() changes it in place (made by the eager warm-up steps, before the capture).
      run_precision().backward(loss);
      correct = sum(eq(argmax(logits.detach(), 1), y));
    });
    params = net.parameters();
    for (const Tensor& p : params) grads.push_back(p.grad());
  }
};

// One per model, made on first use; leaked: a graph destroyed after the driver's teardown at exit
// would fail.
ClassifierGraph& graph_of(const nn::Module& net) {
  static auto* graphs = new std::map<const nn::Module*, ClassifierGraph>();
  return (*graphs)[&net];
}

}  // namespace

bool& cuda_graph_requested() {
  static bool requested = false;
  return requested;
}

void check_cuda_graph(Device dev, bool parallel) {
  EMBER_CHECK(dev.is_cuda(), "--cuda-graph needs a CUDA device (--device cuda): ", dev,
              " runs each op when it is called, so there are no launches to record");
  EMBER_CHECK(!parallel,
              "--cuda-graph is not supported with --data-parallel or --pipeline: their collectives and "
              "stage transfers run on other streams and wait on the host");
}

bool graphed_classifier_step(nn::Module& net, optim::Optimizer& opt, Device dev, const Tensor& x, const Tensor& y,
                             RunningSums& sums, const CrossEntropyOptions& criterion) {
  ClassifierGraph& g = graph_of(net);
  if (!g.graph && g.eager_steps < kWarmupSteps) {
    ++g.eager_steps;
    return false;
  }
  if (!g.graph) g.capture(net, opt, dev, x, y, criterion);
  if (x.shape() != g.x_shape || y.shape() != g.y_shape) return false;
  g.x.copy_(x);
  g.y.copy_(y);
  for (size_t i = 0; i < g.params.size(); ++i) g.params[i].set_grad(g.grads[i]);
  g.graph->replay();
  run_precision().step(opt);
  run_precision().update();
  const double n = static_cast<double>(y.numel());
  sums["loss_sum"] += g.loss.item() * n;
  sums["correct"] += static_cast<double>(g.correct.item<int64_t>());
  sums["seen"] += n;
  return true;
}

}  // namespace ember::train
