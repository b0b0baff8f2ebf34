#include "layers/loss.h"

namespace ember::nn {

NLLLoss::NLLLoss(NllLossOptions o) : options(std::move(o)) {
  register_buffer("weight", &options.weight);
}

Tensor NLLLoss::forward(const Tensor& log_probs, const Tensor& target) {
  return F::nll_loss(log_probs, target, options);
}

BCELoss::BCELoss(Tensor w, Reduction r) : weight(std::move(w)), reduction(r) {
  register_buffer("weight", &weight);
}

Tensor BCELoss::forward(const Tensor& input, const Tensor& target) {
  return F::binary_cross_entropy(input, target, weight, reduction);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(BceWithLogitsOptions o) : options(std::move(o)) {
  register_buffer("weight", &options.weight);
  register_buffer("pos_weight", &options.pos_weight);
}

Tensor BCEWithLogitsLoss::forward(const Tensor& logits, const Tensor& target) {
  return F::binary_cross_entropy_with_logits(logits, target, options);
}

}  // namespace ember::nn
