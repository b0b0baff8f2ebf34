// Loss modules: the functional losses (functional.h) as modules holding their options, with
// PyTorch's names and defaults. They take (input, target) rather than one tensor, so they are
// called directly (loss_fn(logits, labels)), not placed in a Sequential. Class weights and
// pos_weight are buffers, so they follow to() and appear in state_dict() as in PyTorch.
#pragma once

#include "layers/functional.h"
#include "layers/module.h"

namespace ember::nn {

class Loss : public Module {
 public:
  using Module::forward;
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions options = {});
  Tensor forward(const Tensor& logits, const Tensor& target) override;
  std::string type_name() const override { return "CrossEntropyLoss"; }
  CrossEntropyOptions options;  // options.weight is registered as the buffer "weight"
};

class NLLLoss : public Loss {
 public:
  explicit NLLLoss(NllLossOptions options = {});
  Tensor forward(const Tensor& log_probs, const Tensor& target) override;
  std::string type_name() const override { return "NLLLoss"; }
  NllLossOptions options;
};

class BCELoss : public Loss {
 public:
  explicit BCELoss(Tensor weight = Tensor(), Reduction reduction = Reduction::Mean);
  Tensor forward(const Tensor& input, const Tensor& target) override;
  std::string type_name() const override { return "BCELoss"; }
  Tensor weight;
  Reduction reduction;
};

class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(BceWithLogitsOptions options = {});
  Tensor forward(const Tensor& logits, const Tensor& target) override;
  std::string type_name() const override { return "BCEWithLogitsLoss"; }
  BceWithLogitsOptions options;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override { return F::mse_loss(input, target, reduction); }
  std::string type_name() const override { return "MSELoss"; }
  Reduction reduction;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(Reduction reduction = Reduction::Mean) : reduction(reduction) {}
  Tensor forward(const Tensor& input, const Tensor& target) override { return F::l1_loss(input, target, reduction); }
  std::string type_name() const override { return "L1Loss"; }
  Reduction reduction;
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(Reduction reduction = Reduction::Mean, double beta = 1.0) : reduction(reduction), beta(beta) {}
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return F::smooth_l1_loss(input, target, reduction, beta);
  }
  std::string type_name() const override { return "SmoothL1Loss"; }
  Reduction reduction;
  double beta;
};

class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(KlReduction reduction = KlReduction::Mean, bool log_target = false)
      : reduction(reduction), log_target(log_target) {}
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return F::kl_div(input, target, reduction, log_target);
  }
  std::string type_name() const override { return "KLDivLoss"; }
  KlReduction reduction;
  bool log_target;
};

}  // namespace ember::nn
