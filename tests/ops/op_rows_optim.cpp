// Rows: the fused optimizer steps and gradient clipping (layers/optim/fused_kernels.h). Each row
// makes parameters on the backend's device from the inputs, sets gradients, runs a few steps (the
// state carries over) and returns the parameters (no autograd): every optimizer variant (SGD's
// first momentum step, dampening, Nesterov, weight decay, maximize; Adam and AdamW with amsgrad;
// RMSprop centered and with momentum; Adagrad) in float32 and float64, through the optimizers and
// through the single-tensor kernels the optimizers do not reach on a device; the multi-tensor Adam
// step over more parameters than one launch takes, of sizes around its chunk and empty ones, each
// with its own step count; the gradient norms for p = 1, 2, 3, inf of one tensor and of many of
// both dtypes, NaN and empty gradients. These rows took over tests/emu's optimizer checks.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/autograd/grad_mode.h"
#include "layers/optim/adagrad.h"
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#include "layers/optim/fused_kernels.h"
#include "layers/optim/rmsprop.h"
#include "layers/optim/sgd.h"
#include "op_table.h"
#include "oracle.h"

namespace ember::ops_test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

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
std::function<Inputs(Generator&)> two_params_of(DType dt) {
  return [dt](Generator& g) {
    Inputs x = two_params(g);
    for (Tensor& t : x) t = t.to(dt);
    return x;
  };
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

// Sizes for the multi-tensor launches: more tensors than one launch's 24 slots, one more element
// than a chunk of 8192, an empty one. (A tensor of more chunks than one launch's block table is
// tests/emu/optim_multi_tensor_emu_test.cpp's: it is too large for the table.)
std::vector<int64_t> many_sizes() {
  std::vector<int64_t> sizes = {1, 0, 8193};
  for (int i = 0; i < 22; ++i) sizes.push_back(31 + 7 * i);
  return sizes;
}
// A parameter and its gradient per size, parameter k in float64 where `mixed` and k is odd.
std::function<Inputs(Generator&)> many_params(DType dt, bool mixed = false) {
  return [dt, mixed](Generator& g) {
    Inputs x;
    int k = 0;
    for (int64_t n : many_sizes()) {
      const DType d = mixed && k++ % 2 ? DType::Float64 : dt;
      x.push_back(rn(g, {n}).to(d));
      x.push_back(rn(g, {n}).to(d));
    }
    return x;
  };
}

// Adam through the single-tensor kernel, n steps from zero state (the optimizer reaches only the
// multi-tensor kernel on a device).
std::function<Tensor(const Inputs&)> adam_kernel_steps(optim::AdamHyper h, int n = 3) {
  return [h, n](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    NoGradGuard ng;
    for (Tensor& p : ps) {
      const Tensor m = zeros_like(p), v = zeros_like(p), vmax = h.amsgrad ? zeros_like(p) : Tensor();
      for (int step = 1; step <= n; ++step) {
        optim::AdamHyper hs = h;
        hs.bias_correction1 = 1.0 - std::pow(h.beta1, step);
        hs.bias_correction2 = 1.0 - std::pow(h.beta2, step);
        optim::adam_step_stub(p.device())(p.detach(), p.grad(), m, v, vmax, hs);
      }
    }
    return flat(ps);
  };
}

// The gradients, flat, in float64 on the CPU.
Tensor grads_of(const std::vector<Tensor>& ps) {
  std::vector<Tensor> gs;
  for (const Tensor& p : ps) gs.push_back(p.grad().reshape({-1}).to(Device::cpu(), DType::Float64));
  return cat(gs, 0);
}

// Adds a row of the two parameters (two_params) and a step `f` on them, compared to 1e-5 without
// gradients. An object, so that each piece of the table below names it once.
struct TwoParamRows {
  std::vector<OpRow>& rows;
  void operator()(const std::string& name, std::function<Tensor(const Inputs&)> f) const {
    rows.push_back({name, two_params, std::move(f), 1e-5, false, false, false});
  }
};

}  // namespace

namespace {

void add_optimizer_variant_rows(std::vector<OpRow>& t) {
  // Every variant in both dtypes (float32 keeps the plain name).
  for (DType dt : {DType::Float32, DType::Float64}) {
    const std::string sfx = dt == DType::Float32 ? "" : "_float64";
    auto variant = [&](const std::string& name, std::function<Tensor(const Inputs&)> f) {
      t.push_back(
          {name + sfx, two_params_of(dt), std::move(f), dt == DType::Float32 ? 1e-5 : 1e-11, false, false, false});
    };
    variant("sgd_momentum_nesterov",
            steps<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}));
    variant("sgd_plain_maximize", steps<optim::SGD>(optim::SGDOptions{.lr = 0.05, .maximize = true}));
    variant("sgd_momentum_maximize",
            steps<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .maximize = true}));
    variant("sgd_momentum_dampening_weight_decay",
            steps<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}));
    variant("adam", steps<optim::Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.01}));
    variant("adam_plain", steps<optim::Adam>(optim::AdamOptions{.lr = 1e-2}));
    variant("adam_weight_decay_maximize",
            steps<optim::Adam>(optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.05, .maximize = true}));
    variant("adamw", steps<optim::AdamW>(optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.05}));
    variant("adamw_amsgrad", steps<optim::AdamW>(optim::AdamWOptions{.lr = 1e-2, .amsgrad = true}));
    variant("rmsprop_plain", steps<optim::RMSprop>(optim::RMSpropOptions{.lr = 1e-2}));
    variant("rmsprop_momentum", steps<optim::RMSprop>(optim::RMSpropOptions{.lr = 1e-2, .momentum = 0.9}));
    variant("rmsprop_centered_momentum",
            steps<optim::RMSprop>(optim::RMSpropOptions{.lr = 1e-2, .momentum = 0.5, .centered = true}));
    variant("rmsprop_centered_momentum_weight_decay",
            steps<optim::RMSprop>(
                optim::RMSpropOptions{.lr = 1e-2, .weight_decay = 0.01, .momentum = 0.9, .centered = true}));
    variant("adagrad", steps<optim::Adagrad>(optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.01, .weight_decay = 0.1}));
    variant("adagrad_initial_accumulator", steps<optim::Adagrad>(optim::AdagradOptions{
                                               .lr = 0.05, .weight_decay = 0.01, .initial_accumulator_value = 0.1}));
    // The single-tensor Adam kernel in each variant (the optimizer takes the multi-tensor one on a
    // device).
    const optim::AdamHyper h{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    optim::AdamHyper wd_max = h, decoupled = h, decoupled_ams = h;
    wd_max.weight_decay = 0.05, wd_max.maximize = true;
    decoupled.weight_decay = 0.05, decoupled.decoupled_weight_decay = true;
    decoupled_ams = decoupled, decoupled_ams.amsgrad = true;
    variant("adam_kernel_plain", adam_kernel_steps(h));
    variant("adam_kernel_weight_decay_maximize", adam_kernel_steps(wd_max));
    variant("adam_kernel_decoupled", adam_kernel_steps(decoupled));
    variant("adam_kernel_decoupled_amsgrad", adam_kernel_steps(decoupled_ams));
  }
}

void add_multi_tensor_step_rows(std::vector<OpRow>& t) {
  // The multi-tensor step over many parameters that join one by one, so each has its own step
  // count (3, 2 or 1) and bias corrections.
  for (DType dt : {DType::Float32, DType::Float64}) {
    using Make = std::function<std::unique_ptr<optim::Adam>(const std::vector<Tensor>&)>;
    const std::vector<std::pair<const char*, Make>> variants = {
        {"plain",
         [](const std::vector<Tensor>& ps) {
           return std::make_unique<optim::Adam>(ps, optim::AdamOptions{.lr = 1e-2});
         }},
        {"amsgrad_weight_decay",
         [](const std::vector<Tensor>& ps) {
           return std::make_unique<optim::Adam>(ps,
                                                optim::AdamOptions{.lr = 1e-2, .weight_decay = 0.05, .amsgrad = true});
         }},
        {"decoupled",
         [](const std::vector<Tensor>& ps) {
           return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 1e-2, .weight_decay = 0.05});
         }},
    };
    for (const auto& [name, make] : variants) {
      t.push_back({std::string("adam_many_params_") + name + "_" + dtype_name(dt), many_params(dt),
                   [make = make](const Inputs& x) {
                     std::vector<Tensor> ps;
                     for (size_t i = 0; i + 1 < x.size(); i += 2)
                       ps.push_back(x[i].detach().clone().requires_grad_(true));
                     const std::unique_ptr<optim::Adam> opt = make(ps);
                     for (size_t joined = 0; joined < 3; ++joined) {
                       for (size_t k = 0; k < ps.size(); ++k)
                         if (k % 3 == joined) ps[k].set_grad(x[2 * k + 1].detach().clone());
                       opt->step();
                     }
                     return flat(ps);
                   },
                   dt == DType::Float32 ? 1e-5 : 1e-11, false, false, false});
    }
  }
}

void add_single_tensor_kernel_rows(std::vector<OpRow>& t) {
  const TwoParamRows row{t};
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
    return cat({full({1}, n, {.dtype = DType::Float64}), grads_of(ps)}, 0);
  });
  row("clip_grad_norm_inf", [](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    const double n = optim::clip_grad_norm_(ps, 0.5, kInf);
    return cat({full({1}, n, {.dtype = DType::Float64}), grads_of(ps)}, 0);
  });
}

void add_grad_norm_every_p_rows(std::vector<OpRow>& t) {
  // One tensor's norm for every p through the single-tensor kernel, in both dtypes, sizes of one
  // element, under a block and over several; scale and clip exactly (x *= s, clamp).
  for (DType dt : {DType::Float32, DType::Float64}) {
    auto sizes = [dt](Generator& g) { return Inputs{rn(g, {1}).to(dt), rn(g, {777}).to(dt), rn(g, {2100}).to(dt)}; };
    t.push_back({std::string("grad_norm_kernel_every_p_") + dtype_name(dt),
                 sizes,
                 [](const Inputs& x) {
                   std::vector<double> v;
                   for (const Tensor& a : x)
                     for (double p : {1.0, 2.0, 3.0, kInf})
                       v.push_back(optim::grad_norm_stub(a.device())(a.detach().contiguous(), p));
                   return from_vector<double>(v, {static_cast<int64_t>(v.size())});
                 },
                 // sum |a|^p (the stub's result; max |a| for p = inf): sums of n positive terms are
                 // within about n units of rounding of the exact sum, relative to it (no cancellation:
                 // no absolute part), and a p-th power adds p: 3 n = 6300 units of 2^-24 in float32
                 // (3.8e-4), of 2^-53 in float64.
                 std::ldexp(6300.0, dt == DType::Float32 ? -24 : -53),
                 false,
                 false,
                 false,
                 {},
                 [](const Inputs& x) {
                   std::vector<double> v;
                   for (const Tensor& a : x) {
                     const std::vector<double> e = element_values(a);
                     for (double p : {1.0, 2.0, 3.0, kInf}) {
                       long double acc = 0.0L;
                       for (double y : e)
                         acc = p == kInf ? std::max(acc, static_cast<long double>(std::abs(y)))
                                         : acc + std::pow(static_cast<long double>(std::abs(y)), p);
                       v.push_back(static_cast<double>(acc));
                     }
                   }
                   return from_vector<double>(v, {static_cast<int64_t>(v.size())});
                 },
                 0.0});
    t.push_back({std::string("scale_and_clip_value_kernels_") + dtype_name(dt),
                 sizes,
                 [](const Inputs& x) {
                   std::vector<Tensor> out;
                   for (const Tensor& a : x) {
                     NoGradGuard ng;
                     const Tensor c = a.detach().clone();
                     optim::scale_stub(c.device())(c, 0.37);
                     out.push_back(c.clone());
                     optim::clip_value_stub(c.device())(c, 0.2);
                     out.push_back(c);
                   }
                   return cat(out, 0);
                 },
                 0.0,
                 false,
                 false,
                 false,
                 {},
                 // x * s in the dtype (a float32 product of two floats is exact in double, then
                 // rounded once), then clamped to the dtype's +-0.2.
                 [dt](const Inputs& x) {
                   std::vector<double> v;
                   const double s = converted(0.37, dt), c = converted(0.2, dt);
                   for (const Tensor& a : x) {
                     std::vector<double> scaled;
                     for (double y : element_values(a)) scaled.push_back(converted(y * s, dt));
                     v.insert(v.end(), scaled.begin(), scaled.end());
                     for (double y : scaled) v.push_back(std::clamp(y, -c, c));
                   }
                   return from_vector<double>(v, {static_cast<int64_t>(v.size())});
                 }});
  }
  t.push_back({"grad_norm_kernel_nan", [](Generator&) { return Inputs{full({300}, 1.0)}; },
               [](const Inputs& x) {
                 const Tensor c = x[0].detach().clone();
                 c.narrow(0, 77, 1).fill_(NAN);
                 return tensor({optim::grad_norm_stub(c.device())(c, kInf)}, {.dtype = DType::Float64});
               },
               0.0, false, false, false});
}

void add_many_tensor_clip_rows(std::vector<OpRow>& t) {
  const TwoParamRows row{t};
  // Many tensors of both dtypes at once (the device sums them in one pass, float32 ones first),
  // every p, fresh gradients each time; the last clipping's gradients.
  t.push_back({"clip_grad_norm_many_params_every_p", many_params(DType::Float32, true),
               [](const Inputs& x) {
                 std::vector<double> norms;
                 std::vector<Tensor> ps;
                 for (double p : {1.0, 2.0, 3.0, kInf}) {
                   ps = params_of(x);
                   norms.push_back(optim::clip_grad_norm_(ps, 1.0, p));
                 }
                 return cat({from_vector<double>(norms, {4}), grads_of(ps)}, 0);
               },
               1e-5, false, false, false});
  // An empty gradient's norm is 0; a NaN makes the infinity norm NaN, also beside other tensors.
  t.push_back({"clip_grad_norm_empty_and_nan",
               [](Generator& g) {
                 return Inputs{rn(g, {0}), rn(g, {0}), rn(g, {1027}), rn(g, {1027}), rn(g, {300}), full({300}, 1.0)};
               },
               [](const Inputs& x) {
                 std::vector<Tensor> ps = params_of(x);
                 ps[2].grad().narrow(0, 77, 1).fill_(NAN);
                 const double empty_norm = optim::clip_grad_norm_({ps[0]}, 1.0);
                 const double nan_norm = optim::clip_grad_norm_({ps[1], ps[2]}, 1.0, kInf);
                 return tensor({empty_norm, nan_norm}, {.dtype = DType::Float64});
               },
               0.0, false, false, false});
  row("clip_grad_value", [](const Inputs& x) {
    std::vector<Tensor> ps = params_of(x);
    optim::clip_grad_value_(ps, 0.3);
    std::vector<Tensor> gs;
    for (const Tensor& p : ps) gs.push_back(p.grad().reshape({-1}));
    return cat(gs, 0);
  });
}

// GradScaler's fused unscale (unscale_stub) over more tensors than one launch's 24 slots, of both
// dtypes, a chunk and one more element and an empty one: every value divided by a scale of 512
// (exact: a power of two) and the flag left at 0; then the same with a NaN in one tensor and an inf
// in another, which sets it (the values are still divided, as torch's kernel does).
void add_unscale_rows(std::vector<OpRow>& t) {
  auto run = [](const Inputs& x, bool plant) {
    NoGradGuard ng;
    const Device dev = x[0].device();
    std::vector<Tensor> gs;
    for (const Tensor& a : x) gs.push_back(a.detach().clone());
    if (plant) {
      gs[4].narrow(0, 4000, 1).fill_(NAN);  // 8193 float32 elements
      gs[7].narrow(0, 3, 1).fill_(-kInf);   // 31 float64 ones
    }
    const Tensor scale = full({}, 512.0, {DType::Float64, dev}), found = zeros({}, {DType::Float64, dev});
    optim::unscale_stub(dev)(gs, scale, found);
    std::vector<Tensor> out;
    for (const Tensor& g : gs) out.push_back(g.to(DType::Float64).reshape({-1}));
    out.push_back(found.reshape({1}));
    return cat(out, 0);
  };
  t.push_back({"grad_scaler_unscale_many_tensors",
               many_params(DType::Float32, true),
               [run](const Inputs& x) {
                 return cat({run(x, false), run(x, true)}, 0);
               },
               0.0,
               false,
               false,
               false,
               {},
               // x / 512 in the tensor's own dtype is exact; the flags are 0 and 1.
               [](const Inputs& x) {
                 std::vector<double> v;
                 for (int plant = 0; plant < 2; ++plant) {
                   for (size_t i = 0; i < x.size(); ++i) {
                     std::vector<double> e = element_values(x[i]);
                     if (plant && i == 4) e[4000] = NAN;
                     if (plant && i == 7) e[3] = -kInf;
                     for (double y : e) v.push_back(y / 512.0);
                   }
                   v.push_back(plant);
                 }
                 return from_vector<double>(v, {static_cast<int64_t>(v.size())});
               }});
}

// GradScaler's update on the device (update_scale_stub): from scale 1024 and no clean steps, with a
// growth interval of 3, the inputs' flags one update each (clean, clean, clean: grows; inf: backs
// off; clean, inf, clean, clean, clean: grows), every (scale, tracker) after each.
void add_update_scale_rows(std::vector<OpRow>& t) {
  t.push_back(
      {"grad_scaler_update_scale",
       [](Generator&) {
         return Inputs{tensor({0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0})};
       },
       [](const Inputs& x) {
         NoGradGuard ng;
         const Device dev = x[0].device();
         const Tensor scale = full({}, 1024.0, {DType::Float64, dev}), tracker = zeros({}, {DType::Float64, dev});
         std::vector<Tensor> out;
         for (int64_t i = 0; i < x[0].numel(); ++i) {
           const Tensor flag = x[0].narrow(0, i, 1).reshape({}).to(DType::Float64).contiguous();
           optim::update_scale_stub(dev)(scale, tracker, flag,
                                         {.growth_factor = 2.0, .backoff_factor = 0.25, .growth_interval = 3});
           out.push_back(scale.reshape({1}).clone());
           out.push_back(tracker.reshape({1}).clone());
         }
         return cat(out, 0);
       },
       0.0,
       false,
       false,
       false,
       {},
       [](const Inputs&) {
         return tensor({1024.0, 1.0, 1024.0, 2.0, 2048.0, 0.0, 512.0, 0.0, 512.0, 1.0, 128.0, 0.0, 128.0, 1.0, 128.0,
                        2.0, 256.0, 0.0},
                       {.dtype = DType::Float64});
       }});
}

}  // namespace

void add_optim_rows(std::vector<OpRow>& t) {
  add_optimizer_variant_rows(t);
  add_multi_tensor_step_rows(t);
  add_single_tensor_kernel_rows(t);
  add_grad_norm_every_p_rows(t);
  add_many_tensor_clip_rows(t);
  add_unscale_rows(t);
  add_update_scale_rows(t);
}

}  // namespace ember::ops_test
