// batch_norm and layer_norm: argument checks, the in-place running-statistics update (outside
// autograd), and one autograd node each with a fused backward kernel.
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/nn_kernels.h"
#include "core/ops/autocast.h"
#include "core/ops/nn.h"
#include "core/ops/nn_checks.h"

namespace ember {

using autograd::SavedTensor;
using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;
using nn_detail::raw;

Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  if (auto c = autocast_args(AutocastOp::batch_norm, input, weight, bias))
    return batch_norm((*c)[0], running_mean, running_var, (*c)[1], (*c)[2], training, momentum, eps);
  const char* op = "batch_norm";
  nn_detail::check_float_input(input, op, "input");
  EMBER_CHECK(input.dim() >= 2, op, ": expected an input [N, C, *] with at least 2 dims, got shape ",
              shape_str(input.shape()));
  const int64_t N = input.size(0), C = input.size(1);
  int64_t S = 1;  // the spatial size, from the shape (N or C may be 0)
  for (int64_t d = 2; d < input.dim(); ++d) S *= input.size(d);
  EMBER_CHECK(running_mean.defined() == running_var.defined(), op,
              ": running_mean and running_var must both be given or both be undefined");
  nn_detail::check_channel_vector(running_mean, C, input, op, "running_mean");
  nn_detail::check_channel_vector(running_var, C, input, op, "running_var");
  nn_detail::check_channel_vector(weight, C, input, op, "weight");
  nn_detail::check_channel_vector(bias, C, input, op, "bias");
  EMBER_CHECK(eps > 0, op, ": eps must be positive, got ", eps);
  if (training) {
    EMBER_CHECK(N * S > 1, op, ": expected more than 1 value per channel when training, got input shape ",
                shape_str(input.shape()));
    EMBER_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
  } else {
    EMBER_CHECK(running_mean.defined(), op, ": running_mean and running_var are needed in eval mode");
  }

  Tensor x = raw(input).view({N, C, S});
  Tensor w = raw(weight), b = raw(bias);
  Tensor out = empty(input.shape(), input.options());
  const TensorOptions stat_opts{DType::Float64, input.device()};
  Tensor save_mean = empty({C}, stat_opts), save_invstd = empty({C}, stat_opts);
  BatchNormArgs args{training, momentum, eps};
  {
    // The running statistics are buffers, not part of the graph: updated in place without history.
    NoGradGuard ng;
    Tensor rm = running_mean, rv = running_var;
    const bool copy_back = rm.defined() && (!rm.is_contiguous() || !rv.is_contiguous());
    if (copy_back) rm = rm.contiguous(), rv = rv.contiguous();
    batch_norm_forward_stub(input.device())(out.view({N, C, S}), save_mean, save_invstd, x, w, b,
                                            rm.defined() ? rm.detach() : rm, rv.defined() ? rv.detach() : rv, args);
    if (training && running_mean.defined()) {
      if (copy_back) {
        Tensor m = running_mean, v = running_var;
        m.copy_(rm), v.copy_(rv);
      } else {
        running_mean.bump_version();
        running_var.bump_version();
      }
    }
  }

  if (autograd::any_requires_grad({input, weight, bias})) {
    SavedTensor sx(x), sw(w), sm(save_mean), si(save_invstd);
    Shape in_shape = input.shape();
    autograd::record("BatchNormBackward", {input, weight, bias}, {out},
                     [sx, sw, sm, si, in_shape, training, C](const Grads& gr, const Needs& n) -> Grads {
                       Tensor xv = sx.get();
                       Tensor go = raw(gr[0]).view(xv.shape());
                       Grads r(3);
                       if (n[0]) r[0] = empty(xv.shape(), xv.options());
                       if (n[1]) r[1] = empty({C}, xv.options());
                       if (n[2]) r[2] = empty({C}, xv.options());
                       batch_norm_backward_stub(xv.device())(r[0], r[1], r[2], go, xv, sw.get(), sm.get(), si.get(),
                                                             training);
                       if (n[0]) r[0] = r[0].view(in_shape);
                       return r;
                     });
  }
  return out;
}

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (auto c = autocast_args(AutocastOp::layer_norm, input, weight, bias))
    return layer_norm((*c)[0], normalized_shape, (*c)[1], (*c)[2], eps);
  const char* op = "layer_norm";
  nn_detail::check_float_input(input, op, "input");
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  EMBER_CHECK(k >= 1, op, ": normalized_shape must have at least one dim");
  bool match = input.dim() >= k;
  for (int64_t i = 0; match && i < k; ++i) match = input.size(input.dim() - k + i) == normalized_shape[i];
  EMBER_CHECK(match, op, ": normalized_shape ", shape_str(normalized_shape),
              " does not match the input's trailing dims (input shape ", shape_str(input.shape()), ")");
  for (const auto& [t, what] : {std::pair{weight, "weight"}, std::pair{bias, "bias"}}) {
    if (!t.defined()) continue;
    nn_detail::check_like_input(t, input, op, what);
    EMBER_CHECK(t.shape() == normalized_shape, op, ": ", what, " must have shape ", shape_str(normalized_shape),
                ", got ", shape_str(t.shape()));
  }
  EMBER_CHECK(eps > 0, op, ": eps must be positive, got ", eps);
  const int64_t D = numel_of(normalized_shape);
  const int64_t M = D == 0 ? 0 : input.numel() / D;

  Tensor x = raw(input).view({M, D});
  Tensor w = raw(weight).defined() ? raw(weight).view({D}) : Tensor();
  Tensor b = raw(bias).defined() ? raw(bias).view({D}) : Tensor();
  Tensor out = empty(input.shape(), input.options());
  const TensorOptions stat_opts{DType::Float64, input.device()};
  Tensor mean = empty({M}, stat_opts), rstd = empty({M}, stat_opts);
  layer_norm_forward_stub(input.device())(out.view({M, D}), mean, rstd, x, w, b, eps);

  if (autograd::any_requires_grad({input, weight, bias})) {
    SavedTensor sx(x), sw(w), sm(mean), sr(rstd);
    Shape in_shape = input.shape(), ns = normalized_shape;
    autograd::record("LayerNormBackward", {input, weight, bias}, {out},
                     [sx, sw, sm, sr, in_shape, ns, D](const Grads& gr, const Needs& n) -> Grads {
                       Tensor xv = sx.get();
                       Tensor go = raw(gr[0]).view(xv.shape());
                       Grads r(3);
                       if (n[0]) r[0] = empty(xv.shape(), xv.options());
                       if (n[1]) r[1] = empty({D}, xv.options());
                       if (n[2]) r[2] = empty({D}, xv.options());
                       layer_norm_backward_stub(xv.device())(r[0], r[1], r[2], go, xv, sw.get(), sm.get(), sr.get());
                       if (n[0]) r[0] = r[0].view(in_shape);
                       if (n[1]) r[1] = r[1].view(ns);
                       if (n[2]) r[2] = r[2].view(ns);
                       return r;
                     });
  }
  return out;
}

}  // namespace ember
