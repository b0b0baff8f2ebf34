#include "layers/optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "core/ops/creation.h"
#include "layers/optim/fused_kernels.h"

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

void GradScaler::place_on(Device d) {
  if (!scale_.defined()) {
    scale_ = full({}, state_.scale, {DType::Float64, d});
    tracker_ = full({}, static_cast<double>(state_.growth_tracker), {DType::Float64, d});
  } else if (scale_.device() != d) {
    scale_ = scale_.to(d);
    tracker_ = tracker_.to(d);
  }
}

Tensor GradScaler::scale(const Tensor& loss) {
  EMBER_CHECK(loss.defined(), "GradScaler::scale: undefined loss");
  if (!state_.enabled) return loss;
  if (!scale_.defined()) place_on(loss.device());
  return mul(loss, scale_.to(loss.device(), loss.dtype()));
}

void GradScaler::unscale_(Optimizer& opt) {
  if (!state_.enabled) return;
  PerOptimizer& po = per_step_[&opt];
  EMBER_CHECK(!po.unscaled, "GradScaler::unscale_: already called for this ", opt.name(),
              " optimizer since the last update() (its gradients would be divided twice)");
  NoGradGuard ng;
  std::vector<Tensor> grads;
  for (ParamGroup& group : opt.param_groups())
    for (Tensor& p : group.params)
      if (p.grad().defined()) grads.push_back(p.grad());
  if (!scale_.defined()) place_on(grads.empty() ? Device::cpu() : grads.front().device());
  // One fused pass per device over its gradients (unscale_stub), on the device: nothing is read
  // back. Gradients on another device than the scale's get their own copy of the scale and flag,
  // and their flag joins the scale's device's (the host waits for those copies).
  po.found_inf = zeros_like(scale_);
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  std::vector<std::pair<Tensor, Tensor>> copied_back;  // a strided gradient and its contiguous copy
  for (Tensor& g : grads) {
    auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == g.device(); });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {g.device(), {}});
    it->second.push_back(g.contiguous());
    if (!it->second.back().is_same(g)) copied_back.emplace_back(g, it->second.back());
  }
  for (auto& [dev, gs] : by_device) {
    if (dev == scale_.device()) {
      unscale_stub(dev)(gs, scale_, po.found_inf);
      continue;
    }
    const Tensor flag = zeros({}, {DType::Float64, dev});
    unscale_stub(dev)(gs, scale_.to(dev), flag);
    po.found_inf = maximum(po.found_inf, flag.to(scale_.device()));
  }
  for (auto& [g, c] : copied_back) g.copy_(c);
  if (reduce_) reduce_(po.found_inf);
  po.unscaled = true;
}

void GradScaler::step(Optimizer& opt) {
  if (!state_.enabled) {
    opt.step();
    return;
  }
  if (!per_step_[&opt].unscaled) unscale_(opt);
  opt.step_unless(per_step_[&opt].found_inf);
}

bool GradScaler::found_inf(const Optimizer& opt) const {
  const auto it = per_step_.find(&opt);
  return it != per_step_.end() && it->second.unscaled && it->second.found_inf.item() != 0;
}

void GradScaler::update() {
  if (!state_.enabled) return;
  if (!scale_.defined()) place_on(Device::cpu());
  NoGradGuard ng;
  // Any optimizer's inf/NaN, then the next scale and tracker in one kernel on the scale's device
  // (update_scale_stub), in place: a CUDA graph that captured scale() reads the scale there.
  Tensor any_inf;
  for (const auto& entry : per_step_) {
    if (!entry.second.unscaled) continue;
    const Tensor f = entry.second.found_inf.to(scale_.device());
    any_inf = any_inf.defined() ? maximum(any_inf, f) : f;
  }
  if (!any_inf.defined()) any_inf = zeros_like(scale_);
  update_scale_stub(scale_.device())(scale_, tracker_, any_inf,
                                     {.growth_factor = state_.growth_factor,
                                      .backoff_factor = state_.backoff_factor,
                                      .growth_interval = state_.growth_interval});
  per_step_.clear();
}

double GradScaler::get_scale() const {
  return scale_.defined() ? scale_.item() : state_.scale;
}

int64_t GradScaler::growth_tracker() const {
  return tracker_.defined() ? static_cast<int64_t>(tracker_.item()) : state_.growth_tracker;
}

GradScalerState GradScaler::state_dict() const {
  GradScalerState s = state_;
  s.scale = get_scale();
  s.growth_tracker = growth_tracker();
  return s;
}

void GradScaler::load_state_dict(const GradScalerState& s) {
  check_state(s);
  state_ = s;
  scale_ = tracker_ = Tensor();  // made from state_ on the next use
  per_step_.clear();
}

}  // namespace ember::optim
