// Stochastic gradient descent with momentum, dampening, Nesterov momentum, weight decay and
// maximize, with PyTorch's update rule (torch.optim.SGD):
//   g = ±grad + wd * p;  buf = g on the first step, else momentum * buf + (1 - dampening) * g;
//   g = nesterov ? g + momentum * buf : buf;  p -= lr * g
#pragma once

#include "layers/optim/optimizer.h"

namespace ember::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool maximize = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults = {});
  void step() override;
  using Optimizer::step;
  std::string name() const override { return "SGD"; }

 protected:
  void check_hyperparams(const Hyperparams& h) const override;
};

}  // namespace ember::optim
