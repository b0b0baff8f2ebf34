// Rows: the fused optimizer steps and gradient clipping (layers/optim/fused_kernels.h). Each row
// makes parameters on the backend's device from the inputs, sets gradients, runs a few steps and
// returns the parameters (no autograd).
#include <cmath>

#include "core/autograd/grad_mode.h"
#include "layers/optim/adagrad.h"
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#include "layers/optim/fused_kernels.h"
#include "layers/optim/rmsprop.h"
#include "layers/optim/sgd.h"
#include "op_table.h"

namespace ember::ops_test {
namespace {

// Parameters (x[0], x[2], ...) with gradients (x[1], x[3], ...), detached copies on x's device.
std::vector<Tensor> params_of(const Inputs& x) {
  std::vector<Tensor> ps;
  for (size_t i = 0; i + 1 < x.size(); i += 2) {
    Tensor p = x[i].detach().clone().requires_grad_(true);
    p.set_grad(x[i + 1].detach().clone());
    ps.push_back(p);
  }
  return ps;
}
Tensor flat(const std::vector<Tensor>& ps) {
  std::vector<Tensor> f;
  for (const Tensor& p : ps) f.push_back(p.detach().reshape({-1}));
  return cat(f, 0);
}
// Two parameters of odd sizes and their gradients.
Inputs two_params(Generator& g) {
  return Inputs{rn(g, {37, 5}), rn(g, {37, 5}), rn(g, {1001}), rn(g, {1001})};
}
template <typename Opt, typename Options>
std::function<Tensor(const Inputs&)> steps(Options o, int n = 3) {
  return [o, n](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    Opt opt(ps, o);
    for (int i = 0; i < n; ++i) opt.step();
    return flat(ps);
  };
}

}  // namespace

void add_optim_rows(std::vector<OpRow>& t) {
  auto row = [&](const std::string& name, std::function<Tensor(const Inputs&)> f) {
    t.push_back({name, two_params, std::move(f), 1e-5, false, false, false});
  };
  row("sgd_momentum_nesterov",
      steps<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}));
  row("sgd_plain_maximize", steps<optim::SGD>(optim::SGDOptions{.lr = 0.05, .maximize = true}));
  row("adam", steps<optim::Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.01}));
  row("adamw_amsgrad", steps<optim::AdamW>(optim::AdamWOptions{.lr = 1e-2, .amsgrad = true}));
  row("rmsprop_centered_momentum",
      steps<optim::RMSprop>(optim::RMSpropOptions{.lr = 1e-2, .momentum = 0.5, .centered = true}));
  row("adagrad", steps<optim::Adagrad>(optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1}));
  // One parameter's Adam step through its single-tensor kernel (device backends run whole models
  // through the multi-tensor one, so the optimizer alone never reaches it there).
  row("adam_single_tensor_kernel", [](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    optim::AdamHyper h{.lr = 1e-2,
                       .beta1 = 0.9,
                       .beta2 = 0.999,
                       .eps = 1e-8,
                       .weight_decay = 0.01,
                       .bias_correction1 = 0.1,
                       .bias_correction2 = 0.001,
                       .amsgrad = true};
    for (Tensor& p : ps) {
      NoGradGuard ng;
      const Tensor m = zeros_like(p), v = zeros_like(p), vmax = zeros_like(p);
      optim::adam_step_stub(p.device())(p.detach(), p.grad(), m, v, vmax, h);
    }
    return flat(ps);
  });
  // One tensor's norm through its single-tensor kernel (device backends sum all tensors in one
  // fused pass, so clip_grad_norm_ alone never reaches it there).
  row("grad_norm_single_tensor_kernel", [](const Inputs& x) {
    const Tensor c = x[1].detach().contiguous();
    return tensor({optim::grad_norm_stub(c.device())(c, 2.0), optim::grad_norm_stub(c.device())(c, INFINITY),
                   optim::grad_norm_stub(c.device())(c, 1.0)},
                  {.dtype = DType::Float64});
  });
  row("clip_grad_norm", [](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    const double n = optim::clip_grad_norm_(ps, 1.0);
    std::vector<Tensor> gs = {full({1}, n, {.dtype = DType::Float64})};
    for (const Tensor& p : ps) gs.push_back(p.grad().reshape({-1}).to(Device::cpu(), DType::Float64));
    return cat(gs, 0);
  });
  row("clip_grad_norm_inf", [](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    const double n = optim::clip_grad_norm_(ps, 0.5, INFINITY);
    std::vector<Tensor> gs = {full({1}, n, {.dtype = DType::Float64})};
    for (const Tensor& p : ps) gs.push_back(p.grad().reshape({-1}).to(Device::cpu(), DType::Float64));
    return cat(gs, 0);
  });
  row("clip_grad_value", [](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    optim::clip_grad_value_(ps, 0.3);
    std::vector<Tensor> gs;
    for (const Tensor& p : ps) gs.push_back(p.grad().reshape({-1}));
    return cat(gs, 0);
  });
}

}  // namespace ember::ops_test
