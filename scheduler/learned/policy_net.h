// The learned policy's network: a score per job from its features (policy_features.h), higher
// first. An MLP (kFeatures -> 32 -> 32 -> 1, tanh) plus a linear skip from the features. The
// skip starts as the Gittins ranking (a weight on the Gittins feature, zero elsewhere) and the
// MLP's last layer at zero, so an untrained network ranks exactly like the gittins policy
// (without its starvation guard) and training learns a correction to it: a residual policy,
// which is what makes policy-gradient training from a few hundred simulated windows work.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "layers/linear.h"
#include "layers/module.h"

namespace ember::sched::learned {

inline constexpr int kHidden = 32;
// Score difference per unit of the Gittins feature at the start: 10 turns the feature's
// log1p(1/index)/10 back into log(1/index), so that Gumbel noise of scale 1 explores among jobs
// whose indices are within a factor of a few of each other.
inline constexpr double kGittinsWeight = -10;

class PolicyNet : public nn::Module {
 public:
  explicit PolicyNet(uint64_t seed);
  // features [n, kFeatures] float32 -> scores [n]
  Tensor forward(const Tensor& features) override;
  std::string type_name() const override { return "PolicyNet"; }

 private:
  std::shared_ptr<nn::Linear> l1_, l2_, out_, skip_;
};

// Written through the checkpoint format with metadata (`kind`, the feature count, the training
// command); a file of another kind or shape is an ember::Error naming it.
void save_policy_net(const PolicyNet& net, const std::string& path, const std::map<std::string, std::string>& meta);
std::shared_ptr<PolicyNet> load_policy_net(const std::string& path);

}  // namespace ember::sched::learned
