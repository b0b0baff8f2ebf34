#include "layers/optim/adam.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

namespace {
template <typename O>
Hyperparams to_hyper(const O& o) {
  return {{"lr", o.lr},
          {"beta1", o.beta1},
          {"beta2", o.beta2},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"amsgrad", o.amsgrad ? 1.0 : 0.0},
          {"maximize", o.maximize ? 1.0 : 0.0}};
}
}  // namespace

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam(std::vector<ParamGroup>{{std::move(params), {}}}, to_hyper(options), false) {}

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions defaults) : Adam(std::move(groups), to_hyper(defaults), false) {}

Adam::Adam(std::vector<ParamGroup> groups, Hyperparams defaults, bool decoupled)
    : Optimizer(std::move(defaults)), decoupled_(decoupled) {
  for (auto& g : groups) add_param_group(std::move(g));
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Adam(std::vector<ParamGroup>{{std::move(params), {}}}, to_hyper(options), true) {}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults)
    : Adam(std::move(groups), to_hyper(defaults), true) {}

void Adam::check_hyperparams(const Hyperparams& h) const {
  Optimizer::check_hyperparams(h);
  for (const char* b : {"beta1", "beta2"})
    EMBER_CHECK(h.at(b) >= 0 && h.at(b) < 1, name(), ": invalid ", b, " ", h.at(b), " (must be in [0, 1))");
}

void Adam::step() {
  NoGradGuard ng;
  for (auto& group : groups_) {
    const Hyperparams& o = group.options;
    AdamHyper h;
    h.lr = o.at("lr");
    h.beta1 = o.at("beta1");
    h.beta2 = o.at("beta2");
    h.eps = o.at("eps");
    h.weight_decay = o.at("weight_decay");
    h.amsgrad = o.at("amsgrad") != 0;
    h.maximize = o.at("maximize") != 0;
    h.decoupled_weight_decay = decoupled_;
    // Parameters on a device with a multi-tensor step are batched per device and stepped with a
    // few launches after the loop; the others (every CPU parameter) step one by one, as always.
    std::vector<std::pair<Device, std::vector<AdamTensors>>> batches;
    for (auto& p : group.params) {
      Tensor g = grad_for_step(p);
      if (!g.defined()) continue;
      ParamState& st = state_[p.impl()];
      Tensor m = state_tensor(st, "exp_avg", p), v = state_tensor(st, "exp_avg_sq", p);
      Tensor vmax = h.amsgrad ? state_tensor(st, "max_exp_avg_sq", p) : Tensor();
      h.device = count_step(st, p);  // when on the device, the bias corrections are computed there
      h.bias_correction1 = 1.0 - std::pow(h.beta1, static_cast<double>(st.step));
      h.bias_correction2 = 1.0 - std::pow(h.beta2, static_cast<double>(st.step));
      const Device d = p.device();
      if (d.type != DeviceType::CPU && adam_multi_step_stub.has(d.type)) {
        auto it = std::find_if(batches.begin(), batches.end(), [&](const auto& b) { return b.first == d; });
        if (it == batches.end()) {
          batches.emplace_back(d, std::vector<AdamTensors>());
          it = std::prev(batches.end());
        }
        it->second.push_back({p, g, m, v, vmax, h.bias_correction1, h.bias_correction2, h.device.step});
        continue;
      }
      adam_step_stub(d)(p, g, m, v, vmax, h);
      p.bump_version();
    }
    for (auto& [d, ts] : batches) {
      adam_multi_step_stub(d)(ts, h);
      for (AdamTensors& t : ts) t.param.bump_version();
    }
  }
}

}  // namespace ember::optim
