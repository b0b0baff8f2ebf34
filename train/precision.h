// The training precision of a run (--precision in every training program, `precision:` in model
// files; docs/PRECISION.md): fp32, bf16 (the forward under ember::autocast in bfloat16) or fp16
// (autocast in float16 with loss scaling, optim::GradScaler). The program sets it once from its
// flags; the steps (classifier, GAN, language model) and the Trainer (which checkpoints the
// scaler and records the precision) read it.
#pragma once

#include <optional>
#include <string>

#include "core/ops.h"
#include "layers/optim/grad_scaler.h"
#include "layers/optim/optimizer.h"

namespace ember::train {

class Precision {
 public:
  // "fp32", "bf16" or "fp16"; anything else is an ember::Error naming `what` and the choices.
  static Precision parse(const std::string& name, const std::string& what = "--precision");
  const std::string& name() const { return name_; }
  // The 16-bit type autocast casts to (nothing for fp32).
  std::optional<DType> dtype() const { return dtype_; }
  // Opens the autocast scope of a step's forward and loss in `scope` (nothing for fp32); the
  // caller's scope object ends it (autocast can be neither copied nor moved).
  void enter_autocast(std::optional<autocast>& scope, Device dev) const;
  // backward() of the loss, scaled first in fp16.
  void backward(const Tensor& loss);
  // Before clipping: the gradients' true values (fp16; nothing otherwise).
  void unscale_(optim::Optimizer& opt);
  // The optimizer's step (skipped in fp16 when the gradients overflowed); update() once per
  // training step, after every optimizer's.
  void step(optim::Optimizer& opt);
  void update();
  // The fp16 run's scaler (for checkpoints), else null.
  optim::GradScaler* scaler() { return name_ == "fp16" ? &scaler_ : nullptr; }

 private:
  std::string name_ = "fp32";
  std::optional<DType> dtype_;
  optim::GradScaler scaler_{{.enabled = false}};
};

// The run's precision (fp32 until the program sets it).
Precision& run_precision();

}  // namespace ember::train
