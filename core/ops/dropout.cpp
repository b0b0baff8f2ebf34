// Inverted dropout. The keep-mask is a Bernoulli(1 - p) draw from the Philox generator (its
// counter layout is device independent, so a seed gives the same mask on every device), kept as
// uint8 for the backward, which multiplies by the same mask and scale.
#include "core/autograd/node.h"
#include "core/nn_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/nn.h"
#include "core/ops/nn_checks.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor dropout(const Tensor& input, double p, bool training, Generator* gen) {
  if (auto c = autocast_args(AutocastOp::dropout, input)) return dropout((*c)[0], p, training, gen);
  nn_detail::check_float_input(input, "dropout", "input");
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return input;
  // p == 1 keeps nothing: scale 0 rather than 1/0 (the draw still advances the generator, so the
  // stream does not depend on p)
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Tensor mask = bernoulli(input.shape(), 1.0 - p, {DType::UInt8, input.device()}, gen);
  Tensor x = nn_detail::raw(input);
  Tensor out = empty(input.shape(), input.options());
  dropout_apply_stub(input.device())(out, x, mask, scale);
  if (autograd::any_requires_grad({input})) {
    autograd::record("DropoutBackward", {input}, {out}, [mask, scale](const Grads& g, const Needs&) -> Grads {
      Tensor go = nn_detail::raw(g[0]);
      Tensor gi = empty(go.shape(), go.options());
      dropout_apply_stub(go.device())(gi, go, mask, scale);
      return {gi};
    });
  }
  return out;
}

}  // namespace ember
