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
// The scale, the clean-step count and each step's inf/NaN flag are one-element tensors on the
// device of the losses it scales, and every decision is made there: unscale_ divides by the scale
// and sets the flag in one fused pass (unscale_stub), step() hands the flag to the optimizer, whose
// update kernels skip on it (Optimizer::step_unless), and update() picks the next scale in one
// kernel (update_scale_stub). On a GPU a training step thus never waits for the device
// (torch.amp.GradScaler reads the flag back in step(), one synchronisation a step, unless the
// optimizer is a fused one); the host reads only
// when asked: get_scale(), found_inf(), state_dict(). Gradients on another device than the scale,
// or an optimizer's parameters on several devices, fall back to host reads.
#pragma once

#include <cstdint>
#include <functional>
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

  // loss * S (the loss itself when disabled). The first call puts the scaler's state on the loss's
  // device.
  Tensor scale(const Tensor& loss);
  // Divides every gradient `opt` holds by S, in place, and notes whether any is inf or NaN. Once
  // per optimizer between updates: a second call is an ember::Error (it would divide twice).
  void unscale_(Optimizer& opt);
  // Unscales (unless unscale_ did), then steps `opt` unless its gradients held an inf or NaN,
  // decided on the device (see above).
  void step(Optimizer& opt);
  // Whether opt's gradients held an inf or NaN at its unscale_ since the last update() (so its
  // step was or will be skipped); false when not unscaled yet. Reads the flag back: on a GPU a
  // synchronisation, which step() itself never makes.
  bool found_inf(const Optimizer& opt) const;
  // Backs S off if any step since the last update found inf/NaN, else counts a clean step and
  // grows S every growth_interval of them; then forgets the optimizers' per-step notes.
  void update();

  // These read the device's state back (on a GPU a synchronisation).
  double get_scale() const;
  int64_t growth_tracker() const;
  GradScalerState state_dict() const;
  bool is_enabled() const { return state_.enabled; }
  // Refuses a state that could not have come from a scaler (scale <= 0 or not finite, factors
  // out of range), naming the field.
  void load_state_dict(const GradScalerState& s);

  // For processes that must skip a step together although each holds only some of the gradients
  // (the stages of a pipeline, dist::PipelineOptions::scaler; FSDP's ShardedGradScaler does the
  // same over its process group): unscale_ hands its flag (a float64 scalar on the scale's device,
  // 1 when this process saw an inf or NaN) to `reduce`, which must leave in it the maximum over
  // those processes (a collective: each of them unscales every step). Empty: no reduction.
  using FoundInfReduction = std::function<void(Tensor& found_inf)>;
  void set_found_inf_reduction(FoundInfReduction reduce) { reduce_ = std::move(reduce); }

 private:
  struct PerOptimizer {
    bool unscaled = false;
    Tensor found_inf;  // float64, 1 when a gradient held an inf or NaN, on the scale's device
  };
  // Puts scale_ and tracker_ on `d` (made from state_ the first time, moved after).
  void place_on(Device d);

  GradScalerState state_;   // the options; the scale and the tracker until scale_ exists
  Tensor scale_, tracker_;  // float64 scalars, the current values once made
  std::unordered_map<const Optimizer*, PerOptimizer> per_step_;
  FoundInfReduction reduce_;
};

}  // namespace ember::optim
