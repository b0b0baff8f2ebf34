#include "layers/optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"

namespace ember::optim {

namespace {

void check_state(const GradScalerState& s) {
  EMBER_CHECK(std::isfinite(s.scale) && s.scale > 0, "GradScaler: scale must be positive and finite, got ", s.scale);
  EMBER_CHECK(std::isfinite(s.growth_factor) && s.growth_factor > 1, "GradScaler: growth_factor must be above 1, got ",
              s.growth_factor);
  EMBER_CHECK(s.backoff_factor > 0 && s.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), got ",
              s.backoff_factor);
  EMBER_CHECK(s.growth_interval >= 1, "GradScaler: growth_interval must be at least 1, got ", s.growth_interval);
  EMBER_CHECK(s.growth_tracker >= 0 && s.growth_tracker < s.growth_interval,
              "GradScaler: growth_tracker must be in [0, growth_interval = ", s.growth_interval, "), got ",
              s.growth_tracker);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions o) {
  state_.scale = o.init_scale;
  state_.growth_factor = o.growth_factor;
  state_.backoff_factor = o.backoff_factor;
  state_.growth_interval = o.growth_interval;
  state_.enabled = o.enabled;
  check_state(state_);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  EMBER_CHECK(loss.defined(), "GradScaler::scale: undefined loss");
  return state_.enabled ? mul(loss, state_.scale) : loss;
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!state_.enabled) return;
  PerOptimizer& po = per_step_[&opt];
  EMBER_CHECK(!po.unscaled, "GradScaler::unscale_: already called for this ", opt.name(),
              " optimizer since the last update() (its gradients would be divided twice)");
  NoGradGuard ng;
  const double inv = 1.0 / state_.scale;
  // inf * 0 and NaN * 0 are NaN, anything finite * 0 is 0: the sum over every gradient of its
  // elements times 0 says whether all are finite. Summed on each gradient's device and read back
  // once per device, not once per gradient (on a GPU each read is a synchronisation).
  std::vector<std::pair<Device, Tensor>> probes;
  for (ParamGroup& group : opt.param_groups())
    for (Tensor& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      g.mul_(inv);
      const Tensor z = sum(mul(g, 0.0)).to(DType::Float32);
      auto it = std::find_if(probes.begin(), probes.end(), [&](const auto& e) { return e.first == g.device(); });
      if (it == probes.end())
        probes.emplace_back(g.device(), z);
      else
        it->second = add(it->second, z);
    }
  for (const auto& [device, probe] : probes)
    if (!std::isfinite(probe.item())) po.found_inf = true;
  po.unscaled = true;
}

bool GradScaler::step(Optimizer& opt) {
  if (!state_.enabled) {
    opt.step();
    return true;
  }
  if (!per_step_[&opt].unscaled) unscale_(opt);
  if (per_step_[&opt].found_inf) return false;
  opt.step();
  return true;
}

void GradScaler::update() {
  if (!state_.enabled) return;
  bool found_inf = false;
  for (const auto& entry : per_step_) found_inf = found_inf || entry.second.found_inf;
  if (found_inf) {
    state_.scale *= state_.backoff_factor;
    state_.growth_tracker = 0;
  } else if (++state_.growth_tracker == state_.growth_interval) {
    state_.scale *= state_.growth_factor;
    state_.growth_tracker = 0;
  }
  per_step_.clear();
}

void GradScaler::load_state_dict(const GradScalerState& s) {
  check_state(s);
  state_ = s;
  per_step_.clear();
}

}  // namespace ember::optim
