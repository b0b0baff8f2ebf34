// Adam and AdamW (decoupled weight decay), with amsgrad and maximize, as torch.optim.Adam/AdamW:
//   g = ±grad (+ wd * p for Adam; AdamW instead scales p by 1 - lr * wd)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²;  (amsgrad: v̂ = max(v̂, v))
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// State per parameter: step, exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad).
#pragma once

#include "layers/optim/optimizer.h"

namespace ember::optim {

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool amsgrad = false;
  bool maximize = false;
};

// AdamW's defaults differ only in weight decay (1e-2, as PyTorch).
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
  bool maximize = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {});
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults = {});
  void step() override;
  using Optimizer::step;
  std::string name() const override { return decoupled_ ? "AdamW" : "Adam"; }

 protected:
  Adam(std::vector<ParamGroup> groups, Hyperparams defaults, bool decoupled);
  void check_hyperparams(const Hyperparams& h) const override;

 private:
  bool decoupled_ = false;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = {});
};

}  // namespace ember::optim
