#include "layers/functional.h"

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/ops/autocast.h"

namespace ember::nn::functional {

namespace {

void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  EMBER_CHECK(input.defined() && target.defined(), op, ": undefined input or target");
  EMBER_CHECK(input.shape() == target.shape(), op, ": input shape ", shape_str(input.shape()), " and target shape ",
              shape_str(target.shape()), " must be equal (broadcasting a target is almost always a bug)");
  EMBER_CHECK(input.is_floating_point(), op, ": input must be floating point, got ", dtype_name(input.dtype()));
}

// target.to(input's dtype) when the target is a float of another precision or an integer label.
Tensor as_input_dtype(const Tensor& target, const Tensor& input) {
  return target.dtype() == input.dtype() ? target : target.to(input.dtype());
}

}  // namespace

Tensor reduce_loss(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return mean(loss);
  }
  return loss;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  // Cast here, not in addmm: addmm sees weight.t(), a view, and only a parameter itself has its
  // 16-bit copy cached for the step.
  if (auto c = autocast_args(AutocastOp::linear, input, weight, bias)) return linear((*c)[0], (*c)[1], (*c)[2]);
  EMBER_CHECK(input.defined() && weight.defined(), "linear: undefined input or weight");
  EMBER_CHECK(weight.dim() == 2, "linear: weight must be 2-D [out_features, in_features], got ",
              shape_str(weight.shape()));
  EMBER_CHECK(input.dim() >= 1 && input.size(-1) == weight.size(1), "linear: input ", shape_str(input.shape()), " has ",
              input.dim() >= 1 ? input.size(-1) : 0, " features in its last dim, the weight ",
              shape_str(weight.shape()), " expects ", weight.size(1));
  if (bias.defined())
    EMBER_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "linear: bias shape ", shape_str(bias.shape()),
                " does not match out_features ", weight.size(0));
  if (input.dim() == 2) return bias.defined() ? addmm(bias, input, weight.t()) : mm(input, weight.t());
  if (input.dim() > 2) {
    // Fold the leading dims into one GEMM rather than a batched matmul of small products.
    Shape out_shape = input.shape();
    out_shape.back() = weight.size(0);
    Tensor flat = input.reshape({-1, input.size(-1)});
    Tensor y = bias.defined() ? addmm(bias, flat, weight.t()) : mm(flat, weight.t());
    return y.view(out_shape);
  }
  Tensor y = matmul(input, weight.t());
  return bias.defined() ? y + bias : y;
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& o) {
  if (auto c = autocast_args(AutocastOp::nll_loss, log_probs, o.weight)) {
    NllLossOptions w = o;
    w.weight = (*c)[1];
    return nll_loss((*c)[0], target, w);
  }
  const char* op = "nll_loss";
  EMBER_CHECK(log_probs.defined() && target.defined(), op, ": undefined input or target");
  EMBER_CHECK(log_probs.dim() >= 2, op, ": input must be [N, C] or [N, C, d1, ...], got ",
              shape_str(log_probs.shape()));
  EMBER_CHECK(log_probs.is_floating_point(), op, ": input must be floating point, got ", dtype_name(log_probs.dtype()));
  EMBER_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::Int32, op,
              ": target must hold int64 class indices, got ", dtype_name(target.dtype()));
  Shape expect = log_probs.shape();
  expect.erase(expect.begin() + 1);
  EMBER_CHECK(target.shape() == expect, op, ": target shape ", shape_str(target.shape()), " does not match input ",
              shape_str(log_probs.shape()), " (expected ", shape_str(expect), ")");
  const int64_t C = log_probs.size(1);
  if (o.weight.defined())
    EMBER_CHECK(o.weight.dim() == 1 && o.weight.size(0) == C, op, ": weight must be [", C, "], got ",
                shape_str(o.weight.shape()));
  Tensor tgt = target.to(DType::Int64);
  Tensor valid = ne(tgt, static_cast<double>(o.ignore_index));
  if (tgt.numel() > 0) {
    NoGradGuard ng;
    Tensor safe = where(valid, tgt, zeros_like(tgt));
    const int64_t lo = static_cast<int64_t>(amin(safe).item()), hi = static_cast<int64_t>(amax(safe).item());
    EMBER_CHECK(lo >= 0 && hi < C, op, ": target class ", lo < 0 ? lo : hi, " is out of range for ", C, " classes");
  }
  // The target's one-hot mask along dim 1, zero for ignored targets: the pick is a masked sum,
  // which is what the gradient needs too (it lands only on the picked entries).
  Shape cls_shape(static_cast<size_t>(log_probs.dim()), 1);
  cls_shape[1] = C;
  Tensor classes =
      arange(static_cast<double>(C), {.dtype = DType::Int64, .device = log_probs.device()}).view(cls_shape);
  Tensor hot = logical_and(eq(tgt.unsqueeze(1), classes), valid.unsqueeze(1)).to(log_probs.dtype());
  Tensor w = o.weight.defined() ? hot * as_input_dtype(o.weight, log_probs).view(cls_shape) : hot;
  Tensor loss = neg(sum(log_probs * w, {1}));
  switch (o.reduction) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return sum(loss);
    case Reduction::Mean:
      return sum(loss) / sum(w);
  }
  return loss;
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction) {
  if (auto c = autocast_args(AutocastOp::binary_cross_entropy, input, target, weight))
    return binary_cross_entropy((*c)[0], (*c)[1], (*c)[2], reduction);
  const char* op = "binary_cross_entropy";
  check_same_shape(input, target, op);
  if (input.numel() > 0) {
    NoGradGuard ng;
    const double lo = amin(input).item(), hi = amax(input).item();
    EMBER_CHECK(lo >= 0.0 && hi <= 1.0, op, ": input values must be probabilities in [0, 1], got a range of [", lo,
                ", ", hi, "] (use binary_cross_entropy_with_logits for logits)");
  }
  const Tensor p = input, y = as_input_dtype(target, input);
  Tensor loss;
  {
    NoGradGuard ng;
    loss = neg(y * clamp(log(p), -100.0, std::nullopt) + rsub(y, 1.0) * clamp(log(rsub(p, 1.0)), -100.0, std::nullopt));
  }
  // A hand-written backward, as PyTorch's: differentiating the clamped logs would give 0 * inf =
  // NaN wherever p is exactly 0 or 1 (a saturated sigmoid in float32), which poisons a GAN's
  // discriminator; (p - y) / max(p (1 - p), 1e-12) stays finite.
  if (autograd::any_requires_grad({p, target})) {
    autograd::SavedTensor sp(p), sy(y);
    const DType target_dtype = target.dtype();
    autograd::record(
        "BinaryCrossEntropyBackward", {p, target}, {loss},
        [sp, sy, target_dtype](const std::vector<Tensor>& g, const std::vector<bool>& needs) -> std::vector<Tensor> {
          const Tensor p = sp.get(), y = sy.get();
          std::vector<Tensor> r(2);
          if (needs[0]) r[0] = g[0] * (p - y) / clamp(p * rsub(p, 1.0), 1e-12, std::nullopt);
          if (needs[1])
            r[1] = (g[0] * (clamp(log(rsub(p, 1.0)), -100.0, std::nullopt) - clamp(log(p), -100.0, std::nullopt)))
                       .to(target_dtype);
          return r;
        });
  }
  if (weight.defined()) loss = loss * weight;
  return reduce_loss(loss, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const BceWithLogitsOptions& o) {
  if (auto c = autocast_args(AutocastOp::binary_cross_entropy_with_logits, input, target, o.weight, o.pos_weight)) {
    BceWithLogitsOptions w = o;
    w.weight = (*c)[2];
    w.pos_weight = (*c)[3];
    return binary_cross_entropy_with_logits((*c)[0], (*c)[1], w);
  }
  const char* op = "binary_cross_entropy_with_logits";
  check_same_shape(input, target, op);
  const Tensor x = input, y = as_input_dtype(target, input);
  const Tensor pw = o.pos_weight.defined() ? as_input_dtype(o.pos_weight, input) : Tensor();
  if (pw.defined()) broadcast_shapes(pw.shape(), x.shape(), op);
  Tensor loss;
  {
    NoGradGuard ng;
    // softplus(-x) = log1p(exp(-|x|)) + max(-x, 0), never overflowing.
    Tensor sp_neg = log1p(exp(neg(abs(x)))) + relu(neg(x));
    if (pw.defined())
      loss = rsub(y, 1.0) * x + ((pw - 1.0) * y + 1.0) * sp_neg;
    else
      loss = relu(x) - x * y + log1p(exp(neg(abs(x))));
  }
  if (autograd::any_requires_grad({x, target, pw})) {
    autograd::SavedTensor sx(x), sy(y), spw;
    if (pw.defined()) spw = autograd::SavedTensor(pw);
    const Shape pw_shape = pw.defined() ? pw.shape() : Shape{};
    const DType target_dtype = target.dtype();
    autograd::record("BinaryCrossEntropyWithLogitsBackward", {x, target, pw}, {loss},
                     [sx, sy, spw, pw_shape, target_dtype](const std::vector<Tensor>& g,
                                                           const std::vector<bool>& needs) -> std::vector<Tensor> {
                       const Tensor x = sx.get(), y = sy.get();
                       const Tensor pw = spw.defined() ? spw.get() : Tensor();
                       std::vector<Tensor> r(3);
                       Tensor sp_neg;
                       if (needs[1] || needs[2]) sp_neg = log1p(exp(neg(abs(x)))) + relu(neg(x));
                       if (needs[0]) {
                         // d/dx = (1 - y) - lw * sigmoid(-x), lw = 1 + (pw - 1) y.
                         Tensor s = sigmoid(neg(x));
                         r[0] = pw.defined() ? g[0] * (rsub(y, 1.0) - ((pw - 1.0) * y + 1.0) * s)
                                             : g[0] * (sigmoid(x) - y);
                       }
                       if (needs[1]) {
                         Tensor d = pw.defined() ? neg(x) + (pw - 1.0) * sp_neg : neg(x);
                         r[1] = (g[0] * d).to(target_dtype);
                       }
                       if (needs[2]) r[2] = sum_to(g[0] * y * sp_neg, pw_shape);
                       return r;
                     });
  }
  if (o.weight.defined()) loss = loss * o.weight;
  return reduce_loss(loss, o.reduction);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (auto c = autocast_args(AutocastOp::mse_loss, input, target)) return mse_loss((*c)[0], (*c)[1], reduction);
  check_same_shape(input, target, "mse_loss");
  return reduce_loss(square(input - as_input_dtype(target, input)), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  if (auto c = autocast_args(AutocastOp::l1_loss, input, target)) return l1_loss((*c)[0], (*c)[1], reduction);
  check_same_shape(input, target, "l1_loss");
  return reduce_loss(abs(input - as_input_dtype(target, input)), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  if (auto c = autocast_args(AutocastOp::smooth_l1_loss, input, target))
    return smooth_l1_loss((*c)[0], (*c)[1], reduction, beta);
  check_same_shape(input, target, "smooth_l1_loss");
  EMBER_CHECK(beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  if (beta == 0) return l1_loss(input, target, reduction);
  Tensor d = abs(input - as_input_dtype(target, input));
  Tensor loss = where(lt(d, beta), square(d) * (0.5 / beta), d - 0.5 * beta);
  return reduce_loss(loss, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, KlReduction reduction, bool log_target) {
  if (auto c = autocast_args(AutocastOp::kl_div, input, target)) return kl_div((*c)[0], (*c)[1], reduction, log_target);
  check_same_shape(input, target, "kl_div");
  Tensor t = as_input_dtype(target, input);
  Tensor loss;
  if (log_target) {
    loss = exp(t) * (t - input);
  } else {
    // xlogy(t, t) - t * input, with 0 log 0 = 0 (and a zero, not NaN, gradient there).
    Tensor safe = where(gt(t, 0.0), t, ones_like(t));
    loss = t * log(safe) - t * input;
  }
  switch (reduction) {
    case KlReduction::None:
      return loss;
    case KlReduction::Sum:
      return sum(loss);
    case KlReduction::Mean:
      return mean(loss);
    case KlReduction::BatchMean:
      return input.dim() == 0 ? sum(loss) : sum(loss) / static_cast<double>(input.size(0));
  }
  return loss;
}

}  // namespace ember::nn::functional
