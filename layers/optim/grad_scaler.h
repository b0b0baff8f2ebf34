// Loss scaling for float16 training, as torch.amp.GradScaler. float16 holds no magnitude
// below 2^-24 (about 6e-8): smaller gradients round to zero, and a small loss's are mostly that small: the scaler
// multiplies the loss by S before backward, so the 16-bit gradients are S times larger, then divides the float32
// gradients of the master weights by S before the optimizer reads them. A step whose gradients
// hold an inf or NaN (S too large: an overflow) is skipped and S halved; after `growth_interval`
// clean steps in a row S doubles, so S stays near the largest safe value.
//
//   optim::GradScaler scaler;                      // S = 2^16, x2 every 2000 clean steps, x0.5 on inf
//   { ember::autocast ac(Device::cpu(), DType::Float16); loss = ...; }
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);                          // optional: before clipping, which needs true values
//   optim::clip_grad_norm_(params, 1.0);
//   scaler.step(opt);                              // unscales if not yet; skips on inf/NaN
//   scaler.update();
//
// bfloat16 has float32's exponent range and needs no scaling; a disabled scaler
// (enabled = false) makes every call a pass-through so one training loop serves every precision.
// The inf/NaN check sums a probe of every gradient on its device and reads one value per device
// back to the host (on a GPU one synchronisation per step, as torch.amp.GradScaler's; skipping the
// step on the device without any is not done yet).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include "core/tensor.h"
#include "layers/optim/optimizer.h"

namespace ember::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

// What a checkpoint keeps (proto/checkpoint.proto, GradScalerState).
struct GradScalerState {
  double scale = 65536.0;
  int64_t growth_tracker = 0;  // clean steps since the scale last changed
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * S (the loss itself when disabled).
  Tensor scale(const Tensor& loss) const;
  // Divides every gradient `opt` holds by S, in place, and notes whether any is inf or NaN. Once
  // per optimizer between updates: a second call is an ember::Error (it would divide twice).
  void unscale_(Optimizer& opt);
  // Unscales (unless unscale_ did), then steps `opt` unless its gradients held an inf or NaN.
  // Returns whether it stepped.
  bool step(Optimizer& opt);
  // Backs S off if any step since the last update found inf/NaN, else counts a clean step and
  // grows S every growth_interval of them; then forgets the optimizers' per-step notes.
  void update();

  double get_scale() const { return state_.scale; }
  bool is_enabled() const { return state_.enabled; }
  int64_t growth_tracker() const { return state_.growth_tracker; }
  GradScalerState state_dict() const { return state_; }
  // Refuses a state that could not have come from a scaler (scale <= 0 or not finite, factors
  // out of range), naming the field.
  void load_state_dict(const GradScalerState& s);

 private:
  struct PerOptimizer {
    bool unscaled = false;
    bool found_inf = false;
  };
  GradScalerState state_;
  std::unordered_map<const Optimizer*, PerOptimizer> per_step_;
};

}  // namespace ember::optim
