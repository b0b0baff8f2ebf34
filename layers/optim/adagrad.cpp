#include "layers/optim/adagrad.h"

#include "core/autograd/grad_mode.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

namespace {
Hyperparams to_hyper(const AdagradOptions& o) {
  return {{"lr", o.lr},
          {"lr_decay", o.lr_decay},
          {"weight_decay", o.weight_decay},
          {"initial_accumulator_value", o.initial_accumulator_value},
          {"eps", o.eps},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

Adagrad::Adagrad(std::vector<Tensor> params, AdagradOptions options)
    : Adagrad(std::vector<ParamGroup>{{std::move(params), {}}}, options) {}

Adagrad::Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults) : Optimizer(to_hyper(defaults)) {
  for (auto& g : groups) add_param_group(std::move(g));
  // PyTorch creates the accumulators eagerly, so a checkpoint taken before the first step has them.
  for (auto& g : groups_)
    for (auto& p : g.params) {
      ParamState& st = state_[p.impl()];
      st.tensors.emplace_back("sum", state_like(p, g.options.at("initial_accumulator_value")));
    }
}

void Adagrad::check_hyperparams(const Hyperparams& h) const {
  Optimizer::check_hyperparams(h);
  EMBER_CHECK(h.at("lr_decay") >= 0, "Adagrad: invalid lr_decay ", h.at("lr_decay"), " (must be >= 0)");
  EMBER_CHECK(h.at("initial_accumulator_value") >= 0, "Adagrad: invalid initial_accumulator_value ",
              h.at("initial_accumulator_value"), " (must be >= 0)");
}

void Adagrad::step() {
  NoGradGuard ng;
  for (auto& group : groups_) {
    const Hyperparams& o = group.options;
    AdagradHyper h;
    h.weight_decay = o.at("weight_decay");
    h.eps = o.at("eps");
    h.maximize = o.at("maximize") != 0;
    h.lr = o.at("lr");
    h.lr_decay = o.at("lr_decay");
    for (auto& p : group.params) {
      Tensor g = grad_for_step(p);
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      // Made at construction; a group added later gets it here.
      Tensor sum = state_tensor(st, "sum", p, o.at("initial_accumulator_value"));
      h.device = count_step(st, p);  // when on the device, clr is computed there from its count
      h.clr = h.lr / (1.0 + static_cast<double>(st.step - 1) * h.lr_decay);
      adagrad_step_stub(p.device())(p, g, sum, h);
      p.bump_version();
    }
  }
}

}  // namespace ember::optim
