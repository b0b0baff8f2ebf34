#include "layers/optim/clip_grad.h"

#include <cmath>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "layers/optim/fused_kernels.h"

namespace ember::optim {

namespace {

// The defined gradients of `params`.
std::vector<Tensor> grads_of(const std::vector<Tensor>& params, const char* op) {
  std::vector<Tensor> gs;
  for (const Tensor& p : params) {
    EMBER_CHECK(p.defined(), op, ": undefined parameter");
    Tensor g = p.grad();
    if (!g.defined()) continue;
    EMBER_CHECK(g.is_floating_point(), op, ": gradients must be floating point, got ", dtype_name(g.dtype()));
    gs.push_back(g);
  }
  return gs;
}

// Runs an in-place kernel on g, through a contiguous copy when g is strided.
template <typename F>
void on_contiguous(Tensor& g, const F& f) {
  if (g.is_contiguous()) {
    f(g);
    g.bump_version();
    return;
  }
  Tensor c = g.contiguous();
  f(c);
  g.copy_(c);
}

}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite,
                       const GradNormCombine& combine) {
  EMBER_CHECK(norm_type > 0, "clip_grad_norm_: norm_type must be positive (or INFINITY), got ", norm_type);
  NoGradGuard ng;
  std::vector<Tensor> gs = grads_of(params, "clip_grad_norm_");
  if (gs.empty() && !combine) return 0.0;
  const bool inf = std::isinf(norm_type);
  double acc = 0;
  const Device dev = gs.empty() ? Device::cpu() : gs.front().device();
  bool one_device = true;
  for (const Tensor& g : gs) one_device = one_device && g.device() == dev;
  if (!gs.empty() && one_device && dev.type != DeviceType::CPU && grad_norm_total_stub.has(dev.type)) {
    // On a GPU all the norms are reduced on the device and the host waits once, not once per
    // tensor.
    std::vector<Tensor> cs;
    cs.reserve(gs.size());
    for (const Tensor& g : gs) cs.push_back(g.is_contiguous() ? g : g.contiguous());
    acc = grad_norm_total_stub(dev)(cs, norm_type);
  } else {
    for (const Tensor& g : gs) {
      const Tensor c = g.is_contiguous() ? g : g.contiguous();
      const double v = grad_norm_stub(c.device())(c, norm_type);
      acc = inf ? (std::isnan(v) || std::isnan(acc) ? NAN : std::max(acc, v)) : acc + v;
    }
  }
  if (combine) acc = combine(acc, inf);
  const double total = inf ? acc : std::pow(acc, 1.0 / norm_type);
  if (error_if_nonfinite)
    EMBER_CHECK(std::isfinite(total), "clip_grad_norm_: the total norm of order ", norm_type,
                " of the gradients is non-finite (", total, "), so it cannot be clipped");
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (Tensor& g : gs) on_contiguous(g, [&](const Tensor& c) { scale_stub(c.device())(c, coef); });
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  EMBER_CHECK(clip_value >= 0, "clip_grad_value_: clip_value must be non-negative, got ", clip_value);
  NoGradGuard ng;
  std::vector<Tensor> gs = grads_of(params, "clip_grad_value_");
  for (Tensor& g : gs) on_contiguous(g, [&](const Tensor& c) { clip_value_stub(c.device())(c, clip_value); });
}

}  // namespace ember::optim
