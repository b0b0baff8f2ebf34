// Adagrad with learning-rate decay, weight decay, an initial accumulator value and maximize, as
// torch.optim.Adagrad:
//   g = ±grad + wd * p;  clr = lr / (1 + (t - 1) lr_decay);  sum += g²;  p -= clr g / (sqrt(sum) + eps)
// State per parameter: step, sum (filled with initial_accumulator_value at construction).
#pragma once

#include "layers/optim/optimizer.h"

namespace ember::optim {

struct AdagradOptions {
  double lr = 1e-2;
  double lr_decay = 0.0;
  double weight_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double eps = 1e-10;
  bool maximize = false;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<Tensor> params, AdagradOptions options = {});
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults = {});
  void step() override;
  using Optimizer::step;
  std::string name() const override { return "Adagrad"; }

 protected:
  void check_hyperparams(const Hyperparams& h) const override;
};

}  // namespace ember::optim
