#include "layers/optim/sgd.h"

#include "core/autograd/grad_mode.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

namespace {
Hyperparams to_hyper(const SGDOptions& o) {
  return {{"lr", o.lr},
          {"momentum", o.momentum},
          {"dampening", o.dampening},
          {"weight_decay", o.weight_decay},
          {"nesterov", o.nesterov ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(std::vector<ParamGroup>{{std::move(params), {}}}, options) {}

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions defaults) : Optimizer(to_hyper(defaults)) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void SGD::check_hyperparams(const Hyperparams& h) const {
  Optimizer::check_hyperparams(h);
  EMBER_CHECK(h.at("momentum") >= 0, "SGD: invalid momentum ", h.at("momentum"), " (must be >= 0)");
  if (h.at("nesterov") != 0)
    EMBER_CHECK(h.at("momentum") > 0 && h.at("dampening") == 0,
                "SGD: Nesterov momentum requires a momentum > 0 and zero dampening");
}

void SGD::step() {
  NoGradGuard ng;
  for (auto& group : groups_) {
    const Hyperparams& o = group.options;
    SgdHyper h;
    h.lr = o.at("lr");
    h.momentum = o.at("momentum");
    h.dampening = o.at("dampening");
    h.weight_decay = o.at("weight_decay");
    h.nesterov = o.at("nesterov") != 0;
    h.maximize = o.at("maximize") != 0;
    for (auto& p : group.params) {
      Tensor g = grad_for_step(p);
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      Tensor buf;
      h.init_buffer = false;
      if (h.momentum != 0) buf = state_tensor(st, "momentum_buffer", p, 0.0, &h.init_buffer);
      h.device = count_step(st, p);
      sgd_step_stub(p.device())(p, g, buf, h);
      p.bump_version();
    }
  }
}

}  // namespace ember::optim
