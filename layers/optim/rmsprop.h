// RMSprop with momentum, centering, weight decay and maximize, as torch.optim.RMSprop:
//   g = ±grad + wd * p;  s = alpha s + (1 - alpha) g²;  (centered: a = alpha a + (1 - alpha) g,
//   s̃ = s - a²);  d = sqrt(s̃) + eps;  momentum: buf = momentum buf + g / d, p -= lr buf;
//   else p -= lr g / d.
// State per parameter: step, square_avg (and momentum_buffer, grad_avg when used).
#pragma once

#include "layers/optim/optimizer.h"

namespace ember::optim {

struct RMSpropOptions {
  double lr = 1e-2;
  double alpha = 0.99;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  bool centered = false;
  bool maximize = false;
};

class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, RMSpropOptions options = {});
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = {});
  void step() override;
  using Optimizer::step;
  std::string name() const override { return "RMSprop"; }

 protected:
  void check_hyperparams(const Hyperparams& h) const override;
};

}  // namespace ember::optim
