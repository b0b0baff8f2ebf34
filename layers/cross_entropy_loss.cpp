// CrossEntropyLoss lives apart from the other loss modules because it wraps core's fused
// cross_entropy op.
#include "layers/loss.h"

namespace ember::nn {

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions o) : options(std::move(o)) {
  register_buffer("weight", &options.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& target) {
  return F::cross_entropy(logits, target, options);
}

}  // namespace ember::nn
