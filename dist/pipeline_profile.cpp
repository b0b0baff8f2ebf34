// profile_layers (pipeline_plan.h): what the planner needs to know of each layer, measured.
#include <algorithm>
#include <chrono>

#include "core/allocator.h"
#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/stream.h"
#include "dist/pipeline_plan.h"
#include "layers/container.h"

namespace ember::dist {
namespace {

int64_t bytes_of(const Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.itemsize());
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Profiling runs real forwards and backwards; this puts back what they change, also when a layer
// throws. Gradients are set aside (not cloned): with none, backward makes fresh ones and the
// originals, which a bucket may own, are never written.
class TrainingStateGuard {
 public:
  explicit TrainingStateGuard(nn::Module& m) : generator_(default_generator().state()) {
    NoGradGuard no_grad;
    for (const Tensor& p : m.parameters()) {
      params_.push_back(p);
      grads_.push_back(p.grad());
      p.set_grad(Tensor());
    }
    for (const Tensor& b : m.buffers()) {
      buffers_.push_back(b);
      buffer_values_.push_back(b.clone());
    }
  }
  ~TrainingStateGuard() {
    NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].set_grad(grads_[i]);
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(buffer_values_[i]);
    default_generator().set_state(generator_);
  }
  TrainingStateGuard(const TrainingStateGuard&) = delete;
  TrainingStateGuard& operator=(const TrainingStateGuard&) = delete;

 private:
  std::vector<Tensor> params_, grads_, buffers_, buffer_values_;
  GeneratorState generator_;
};

struct Run {
  double forward_s = 0, backward_s = 0;
  int64_t kept_bytes = 0;
  Tensor output;
};

// One forward and backward of `layer` on `x`, timed on the device's compute stream.
Run run_once(nn::Module& layer, const Tensor& x, Device device) {
  using clock = std::chrono::steady_clock;
  Allocator* alloc = get_allocator(device);
  Stream& stream = get_stream(device);
  Run r;
  stream.synchronize();
  const int64_t before = alloc->stats().in_use;
  auto t0 = clock::now();
  Tensor y = layer(x);
  stream.synchronize();
  auto t1 = clock::now();
  r.kept_bytes = alloc->stats().in_use - before;
  r.forward_s = std::chrono::duration<double>(t1 - t0).count();
  if (y.requires_grad()) {
    // The gradient of sum(y) is ones; made before the clock starts, so only backward is timed.
    Tensor g = ones_like(y);
    stream.synchronize();
    auto t2 = clock::now();
    y.backward(g);
    stream.synchronize();
    r.backward_s = std::chrono::duration<double>(clock::now() - t2).count();
  }
  if (x.requires_grad()) x.set_grad(Tensor());
  r.output = y.detach();
  return r;
}

int64_t state_bytes(const nn::Module& layer, int64_t optimizer_bytes_per_parameter_byte) {
  int64_t bytes = 0;
  for (const Tensor& p : layer.parameters())
    bytes += bytes_of(p) * (p.requires_grad() ? 2 + optimizer_bytes_per_parameter_byte : 1);
  for (const Tensor& b : layer.buffers()) bytes += bytes_of(b);
  return bytes;
}

}  // namespace

std::vector<LayerCost> profile_layers(nn::Sequential& model, const Tensor& micro_batch, int repeats,
                                      int64_t optimizer_bytes_per_parameter_byte) {
  EMBER_CHECK(!model.empty(), "profile_layers: the Sequential has no layers");
  EMBER_CHECK(micro_batch.defined(), "profile_layers: the micro-batch is an undefined tensor");
  EMBER_CHECK(repeats >= 1, "profile_layers: repeats must be at least 1, got ", repeats);
  EMBER_CHECK(optimizer_bytes_per_parameter_byte >= 0,
              "profile_layers: optimizer_bytes_per_parameter_byte must be >= 0, got ",
              optimizer_bytes_per_parameter_byte);
  const auto children = model.named_children();
  const Device device = micro_batch.device();
  TrainingStateGuard guard(model);
  EnableGradGuard grad_on;
  std::vector<LayerCost> out;
  Tensor x = micro_batch;
  for (size_t i = 0; i < model.size(); ++i) {
    nn::Module& layer = model[i];
    LayerCost cost;
    cost.name = (i < children.size() ? children[i].first : std::to_string(i)) + ":" + layer.type_name();
    std::vector<double> fwd, bwd;
    Run r;
    try {
      run_once(layer, x, device);  // warm-up: first-call allocations, caches, kernel choice
      for (int rep = 0; rep < repeats; ++rep) {
        r = run_once(layer, x, device);
        fwd.push_back(r.forward_s);
        bwd.push_back(r.backward_s);
      }
    } catch (const Error& e) {
      EMBER_FAIL("profile_layers: layer ", i, " (", cost.name, "): ", e.what());
    }
    cost.forward_s = median(fwd);
    cost.backward_s = median(bwd);
    cost.output_bytes = bytes_of(r.output);
    cost.activation_bytes = std::max(cost.output_bytes, r.kept_bytes);
    cost.state_bytes = state_bytes(layer, optimizer_bytes_per_parameter_byte);
    out.push_back(std::move(cost));
    x = r.output;
    if (x.is_floating_point()) x.requires_grad_(true);
  }
  return out;
}

}  // namespace ember::dist
