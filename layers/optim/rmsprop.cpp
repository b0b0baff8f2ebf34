#include "layers/optim/rmsprop.h"

#include "core/autograd/grad_mode.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

namespace {
Hyperparams to_hyper(const RMSpropOptions& o) {
  return {{"lr", o.lr},
          {"alpha", o.alpha},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"momentum", o.momentum},
          {"centered", o.centered ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

RMSprop::RMSprop(std::vector<Tensor> params, RMSpropOptions options)
    : RMSprop(std::vector<ParamGroup>{{std::move(params), {}}}, options) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults) : Optimizer(to_hyper(defaults)) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void RMSprop::check_hyperparams(const Hyperparams& h) const {
  Optimizer::check_hyperparams(h);
  EMBER_CHECK(h.at("alpha") >= 0, "RMSprop: invalid alpha ", h.at("alpha"), " (must be >= 0)");
  EMBER_CHECK(h.at("momentum") >= 0, "RMSprop: invalid momentum ", h.at("momentum"), " (must be >= 0)");
}

void RMSprop::step() {
  NoGradGuard ng;
  for (auto& group : groups_) {
    const Hyperparams& o = group.options;
    RmspropHyper h;
    h.lr = o.at("lr");
    h.alpha = o.at("alpha");
    h.eps = o.at("eps");
    h.weight_decay = o.at("weight_decay");
    h.momentum = o.at("momentum");
    h.centered = o.at("centered") != 0;
    h.maximize = o.at("maximize") != 0;
    for (auto& p : group.params) {
      Tensor g = grad_for_step(p);
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      Tensor sq = state_tensor(st, "square_avg", p);
      Tensor buf = h.momentum > 0 ? state_tensor(st, "momentum_buffer", p) : Tensor();
      Tensor ga = h.centered ? state_tensor(st, "grad_avg", p) : Tensor();
      h.device = count_step(st, p);
      rmsprop_step_stub(p.device())(p, g, sq, buf, ga, h);
      p.bump_version();
    }
  }
}

}  // namespace ember::optim
