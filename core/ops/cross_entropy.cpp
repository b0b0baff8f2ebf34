// cross_entropy: log_softmax and the negative log-likelihood fused into one autograd node, with
// PyTorch's semantics for class weights, ignore_index, label smoothing and the reductions (mean
// over class targets divides by the summed weight of the non-ignored targets; over probability
// targets by the number of samples).
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/nn_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/creation.h"
#include "core/ops/elementwise.h"
#include "core/ops/nn.h"
#include "core/ops/nn_checks.h"
#include "core/ops/reduce.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
using nn_detail::raw;

namespace {

// Probability targets (floating) have the logits' shape and dtype and ignore nothing; class
// targets are int64 of the logits' shape without the class dim.
void check_target(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts,
                  const Shape& sample_shape) {
  const char* op = "cross_entropy";
  if (is_floating(target.dtype())) {
    EMBER_CHECK(target.shape() == logits.shape(), op, ": probability targets must have the logits' shape ",
                shape_str(logits.shape()), ", got ", shape_str(target.shape()));
    EMBER_CHECK(target.dtype() == logits.dtype(), op, ": target dtype ", dtype_name(target.dtype()),
                " does not match the logits' ", dtype_name(logits.dtype()));
    EMBER_CHECK(opts.ignore_index < 0, op, ": ignore_index (", opts.ignore_index,
                ") is not supported with probability targets");
  } else {
    EMBER_CHECK(target.dtype() == DType::Int64, op, ": class targets must be int64 (or probabilities of the logits' ",
                "float dtype), got ", dtype_name(target.dtype()));
    EMBER_CHECK(target.shape() == sample_shape, op, ": target shape ", shape_str(target.shape()),
                " does not match the logits' ", shape_str(logits.shape()), " (expected ", shape_str(sample_shape), ")");
  }
}

// The per-sample losses [N, S] reduced (outside autograd: the op records its own backward); the
// mean divides by `divisor`.
Tensor reduce_loss(const Tensor& loss, Reduction reduction, const Tensor& divisor, const Shape& sample_shape) {
  NoGradGuard ng;
  switch (reduction) {
    case Reduction::None:
      return loss.view(sample_shape);
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      break;
  }
  return div(sum(loss), divisor);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const CrossEntropyOptions& opts) {
  if (auto c = autocast_args(AutocastOp::cross_entropy, logits, target, opts.weight)) {
    CrossEntropyOptions o = opts;
    o.weight = (*c)[2];
    return cross_entropy((*c)[0], (*c)[1], o);
  }
  const char* op = "cross_entropy";
  nn_detail::check_float_input(logits, op, "logits");
  nn_detail::check_defined(target, op, "target");
  EMBER_CHECK(logits.dim() >= 1, op, ": logits must have a class dim, got a 0-dim tensor");
  EMBER_CHECK(target.device() == logits.device(), op, ": target is on ", target.device(), " but the logits are on ",
              logits.device());
  EMBER_CHECK(opts.label_smoothing >= 0.0 && opts.label_smoothing <= 1.0, op,
              ": label_smoothing must be in [0, 1], got ", opts.label_smoothing);
  // [C] logits are one sample: view them as [1, C].
  const bool unbatched = logits.dim() == 1;
  const int64_t C = unbatched ? logits.size(0) : logits.size(1);
  EMBER_CHECK(C > 0, op, ": logits have no classes (shape ", shape_str(logits.shape()), ")");
  const int64_t N = unbatched ? 1 : logits.size(0);
  int64_t S = 1;  // the trailing dims' size, from the shape (N may be 0)
  for (int64_t d = 2; d < logits.dim(); ++d) S *= logits.size(d);
  Shape sample_shape;  // the logits' shape without the class dim
  if (!unbatched) {
    sample_shape = logits.shape();
    sample_shape.erase(sample_shape.begin() + 1);
  }

  const bool prob = is_floating(target.dtype());
  check_target(logits, target, opts, sample_shape);
  nn_detail::check_channel_vector(opts.weight, C, logits, op, "weight");

  CrossEntropyArgs args{opts.ignore_index, opts.label_smoothing, prob};
  Tensor x = raw(logits).view({N, C, S});
  Tensor w = raw(opts.weight);
  Tensor t;
  {
    NoGradGuard ng;
    t = raw(target);
    if (prob && opts.label_smoothing > 0) t = add(mul(t, 1.0 - opts.label_smoothing), opts.label_smoothing / C);
    t = prob ? t.view({N, C, S}) : t.view({N, S});
  }
  Tensor loss = empty({N, S}, logits.options());
  Tensor lse = empty({N, S}, logits.options());
  Tensor total_weight = prob ? Tensor() : empty({}, logits.options());
  cross_entropy_forward_stub(logits.device())(loss, lse, total_weight, x, t, w, args);

  // Mean of probability targets: over every sample; of class targets: over their weights.
  const Tensor divisor = opts.reduction != Reduction::Mean ? Tensor()
                         : prob                            ? scalar_tensor(static_cast<double>(N * S), logits.options())
                                                           : total_weight;
  const Tensor out = reduce_loss(loss, opts.reduction, divisor, sample_shape);

  if (autograd::any_requires_grad({logits, prob ? target : Tensor()})) {
    SavedTensor sx(x), st(t), sl(lse), sw(w), sd(divisor);
    const Reduction red = opts.reduction;
    Shape lshape = logits.shape();
    const double ls = opts.label_smoothing;
    autograd::record(
        "CrossEntropyBackward", {logits, prob ? target : Tensor()}, {out},
        [sx, st, sl, sw, sd, red, args, lshape, ls, N, S](const Grads& gr, const Needs& n) -> Grads {
          Tensor xv = sx.get();
          Tensor gl = red == Reduction::None ? raw(gr[0]).view({N, S}) : gr[0].reshape({1, 1}).expand({N, S});
          Grads r(2);
          Tensor gx = n[0] ? empty(xv.shape(), xv.options()) : Tensor();
          Tensor gt = n[1] ? empty(xv.shape(), xv.options()) : Tensor();
          cross_entropy_backward_stub(xv.device())(gx, gt, gl, sd.get(), xv, sl.get(), st.get(), sw.get(), args);
          if (n[0]) r[0] = gx.view(lshape);
          if (n[1]) r[1] = ls > 0 ? mul(gt, 1.0 - ls).view(lshape) : gt.view(lshape);
          return r;
        });
  }
  return out;
}

}  // namespace ember
