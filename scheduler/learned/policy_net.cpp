#include "scheduler/learned/policy_net.h"

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/shape.h"
#include "layers/checkpoint.h"
#include "scheduler/learned/policy_features.h"

namespace ember::sched::learned {
namespace {

constexpr const char* kKind = "ember.sched.policy_net.v1";

}  // namespace

PolicyNet::PolicyNet(uint64_t seed) {
  Generator gen(seed);
  l1_ = std::make_shared<nn::Linear>(kFeatures, kHidden);
  l2_ = std::make_shared<nn::Linear>(kHidden, kHidden);
  out_ = std::make_shared<nn::Linear>(kHidden, 1);
  skip_ = std::make_shared<nn::Linear>(kFeatures, 1, nn::LinearOptions{.bias = false});
  l1_->reset_parameters(&gen);
  l2_->reset_parameters(&gen);
  {
    NoGradGuard guard;
    out_->weight.zero_();
    out_->bias.zero_();
    std::vector<float> w(kFeatures, 0.0f);
    w[kGittinsFeature] = static_cast<float>(kGittinsWeight);
    skip_->weight.copy_(from_vector(w, {1, kFeatures}));
  }
  register_module("l1", l1_);
  register_module("l2", l2_);
  register_module("out", out_);
  register_module("skip", skip_);
}

Tensor PolicyNet::forward(const Tensor& x) {
  EMBER_CHECK(x.dim() == 2 && x.size(1) == kFeatures, "PolicyNet: expected features [n, ", kFeatures, "], got ",
              shape_str(x.shape()));
  Tensor h = l2_->forward(l1_->forward(x).tanh()).tanh();
  return (out_->forward(h) + skip_->forward(x)).reshape({x.size(0)});
}

void save_policy_net(const PolicyNet& net, const std::string& path, const std::map<std::string, std::string>& meta) {
  CheckpointContents c;
  c.model_parameters = net.state_dict();
  c.metadata = meta;
  c.metadata["kind"] = kKind;
  c.metadata["features"] = std::to_string(kFeatures);
  c.metadata["hidden"] = std::to_string(kHidden);
  write_checkpoint(path, c);
}

std::shared_ptr<PolicyNet> load_policy_net(const std::string& path) {
  CheckpointContents c = read_checkpoint(path);
  auto kind = c.metadata.find("kind");
  EMBER_CHECK(kind != c.metadata.end() && kind->second == kKind, "learned policy ", path,
              ": not a policy network checkpoint (expected metadata kind '", kKind, "', got '",
              kind == c.metadata.end() ? std::string("none") : kind->second, "')");
  EMBER_CHECK(c.metadata["features"] == std::to_string(kFeatures) && c.metadata["hidden"] == std::to_string(kHidden),
              "learned policy ", path, ": a network of ", c.metadata["features"], " features and ",
              c.metadata["hidden"], " hidden units; this build's has ", kFeatures, " and ", kHidden);
  auto net = std::make_shared<PolicyNet>(0);
  net->load_state_dict(c.model_parameters);
  return net;
}

}  // namespace ember::sched::learned
