// Optimizers against their update formulas evaluated in double in the test (PyTorch's rules),
// for the first few steps and for each option: momentum, dampening, Nesterov, weight decay,
// maximize, AdamW's decoupled decay, amsgrad, RMSprop centering, Adagrad's decay and initial
// accumulator. Also parameter groups, state_dict round trips and their errors, and gradient
// clipping.
#include <gtest/gtest.h>

#include <cmath>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "layers/module.h"
#include "layers/optim/adagrad.h"
#include "layers/optim/adam.h"
#include "layers/optim/clip_grad.h"
#include "layers/optim/rmsprop.h"
#include "layers/optim/sgd.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;
using namespace ember::optim;

namespace {

const std::vector<double> kP0 = {1.0, -2.0, 0.5, 3.0};

Tensor param(DType dt = DType::Float64, std::vector<double> v = kP0) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, TensorOptions{dt, Device::cpu(), true});
}

// The gradient used at step t: depends on the current parameter and the step, so that every
// moment and buffer matters.
double grad_at(double p, int t, size_t i) {
  return 2.0 * p + 0.3 * static_cast<double>(t) - 0.1 * static_cast<double>(i);
}

void set_grads(Tensor& p, int t) {
  std::vector<double> v = p.to_vector<double>(), g(v.size());
  for (size_t i = 0; i < v.size(); ++i) g[i] = grad_at(v[i], t, i);
  p.set_grad(from_vector(g, p.shape()).to(p.dtype()));
}

// Runs `steps` optimizer steps on p with grad_at, and the reference `update(p, g, t)` per
// element, and compares.
template <typename Ref>
void check_steps(Optimizer& opt, Tensor& p, Ref ref, int steps, double tol) {
  std::vector<double> expect = p.to_vector<double>();
  for (int t = 1; t <= steps; ++t) {
    set_grads(p, t);
    std::vector<double> g(expect.size());
    for (size_t i = 0; i < expect.size(); ++i) g[i] = grad_at(expect[i], t, i);
    opt.step();
    ref(expect, g, t);
    std::vector<double> got = p.to_vector<double>();
    for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], tol) << "step " << t << " elem " << i;
  }
}

}  // namespace

TEST(SGD, PlainStepHandValues) {
  Tensor p = param(DType::Float32, {1.0, 2.0});
  SGD opt({p}, {.lr = 0.1});
  p.set_grad(tensor({1.0, -1.0}));
  opt.step();
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.9f, 2.1f}));
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
}

TEST(SGD, MomentumDampeningWeightDecay) {
  Tensor p = param();
  const double lr = 0.1, mom = 0.9, damp = 0.2, wd = 0.05;
  SGD opt({p}, {.lr = lr, .momentum = mom, .dampening = damp, .weight_decay = wd});
  std::vector<double> buf(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g, int t) {
        for (size_t i = 0; i < x.size(); ++i) {
          double d = g[i] + wd * x[i];
          buf[i] = t == 1 ? d : mom * buf[i] + (1 - damp) * d;
          x[i] -= lr * buf[i];
        }
      },
      3, 1e-12);
  ASSERT_NE(opt.find_state(p), nullptr);
  EXPECT_EQ(opt.find_state(p)->step, 3);
  EXPECT_NEAR(opt.find_state(p)->find("momentum_buffer")->to_vector<double>()[1], buf[1], 1e-12);
}

TEST(SGD, NesterovAndMaximize) {
  Tensor p = param();
  const double lr = 0.05, mom = 0.8;
  SGD opt({p}, {.lr = lr, .momentum = mom, .nesterov = true, .maximize = true});
  std::vector<double> buf(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g, int t) {
        for (size_t i = 0; i < x.size(); ++i) {
          double d = -g[i];
          buf[i] = t == 1 ? d : mom * buf[i] + d;
          x[i] -= lr * (d + mom * buf[i]);
        }
      },
      3, 1e-12);
}

TEST(SGD, Float32MatchesDoubleReference) {
  Tensor p = param(DType::Float32);
  SGD opt({p}, {.lr = 0.1, .momentum = 0.9});
  std::vector<double> buf(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g, int t) {
        for (size_t i = 0; i < x.size(); ++i) {
          buf[i] = t == 1 ? g[i] : 0.9 * buf[i] + g[i];
          x[i] -= 0.1 * buf[i];
        }
      },
      3, 1e-5);
}

TEST(SGD, LargeParameterRunsThreadedAndMatches) {
  const int64_t n = 200000;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<double>(i));
  Tensor p = from_vector(v, {n}, TensorOptions{DType::Float32, Device::cpu(), true});
  p.set_grad(full({n}, 1.0));
  SGD opt({p}, {.lr = 0.5, .weight_decay = 0.1});
  opt.step();
  std::vector<float> got = p.to_vector<float>();
  for (int64_t i = 0; i < n; i += 997) {
    const double x = static_cast<float>(v[static_cast<size_t>(i)]);
    EXPECT_NEAR(got[static_cast<size_t>(i)], x - 0.5 * (1.0 + 0.1 * x), 1e-6);
  }
}

TEST(SGD, Errors) {
  Tensor p = param();
  EXPECT_TRUE(has(error_of([&] { SGD({p}, {.lr = -1}); }), "invalid learning rate"));
  EXPECT_TRUE(has(error_of([&] { SGD({p}, {.lr = 0.1, .nesterov = true}); }), "Nesterov"));
  EXPECT_TRUE(has(error_of([&] { SGD({p}, {.lr = 0.1, .momentum = -0.5}); }), "momentum"));
  EXPECT_TRUE(has(error_of([&] { SGD({p, p}, {}); }), "twice"));
  Tensor nonleaf = p * 2.0;
  EXPECT_TRUE(has(error_of([&] { SGD({nonleaf}, {}); }), "leaf"));
  EXPECT_TRUE(has(error_of([&] { SGD({zeros({2}, {.dtype = DType::Int64})}, {}); }), "floating-point"));
  EXPECT_TRUE(has(error_of([&] {
                    SGD(std::vector<ParamGroup>{{{p}, {{"betas", 0.9}}}});
                  }),
                  "unknown hyperparameter 'betas'"));
  SGD ok({p}, {});
  EXPECT_TRUE(has(error_of([&] { ok.add_param_group({{p}, {}}); }), "already in another parameter group"));
}

TEST(Optimizer, ParamGroupsHaveTheirOwnHyperparameters) {
  Tensor a = param(DType::Float64, {1.0}), b = param(DType::Float64, {1.0}), c = param(DType::Float64, {1.0});
  SGD opt(std::vector<ParamGroup>{{{a}, {}}, {{b}, {{"lr", 0.5}, {"weight_decay", 1.0}}}}, {.lr = 0.1});
  EXPECT_EQ(opt.param_groups()[0].options.at("lr"), 0.1);
  EXPECT_EQ(opt.param_groups()[1].options.at("lr"), 0.5);
  EXPECT_EQ(opt.param_groups()[1].options.at("momentum"), 0.0);  // default filled in
  opt.add_param_group({{c}, {{"lr", 1.0}}});
  for (Tensor* t : {&a, &b, &c}) t->set_grad(tensor({1.0}, {.dtype = DType::Float64}));
  opt.step();
  EXPECT_DOUBLE_EQ(a.item(), 0.9);
  EXPECT_DOUBLE_EQ(b.item(), 1.0 - 0.5 * 2.0);
  EXPECT_DOUBLE_EQ(c.item(), 0.0);
}

TEST(Optimizer, GroupsFromBracedLists) {
  // The form docs/API.md shows: groups of parameter lists with per-group overrides.
  std::vector<Tensor> backbone{param(), param()}, head{param()};
  SGD opt({{backbone, {{"lr", 1e-3}}}, {head, {{"lr", 1e-2}, {"weight_decay", 0.0}}}},
          {.lr = 1e-2, .momentum = 0.9, .weight_decay = 5e-4});
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].params.size(), 2u);
  EXPECT_EQ(opt.param_groups()[0].options.at("weight_decay"), 5e-4);
  EXPECT_EQ(opt.param_groups()[1].options.at("weight_decay"), 0.0);
  EXPECT_EQ(opt.param_groups()[1].options.at("momentum"), 0.9);
}

TEST(Optimizer, ParamsWithoutGradAreSkippedAndZeroGrad) {
  Tensor a = param(), b = param();
  Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(ones({4}, {.dtype = DType::Float64}));
  opt.step();
  EXPECT_NE(opt.find_state(a), nullptr);
  EXPECT_EQ(opt.find_state(b), nullptr);
  EXPECT_EQ(b.to_vector<double>(), kP0);
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(a.grad().sum().item(), 0.0);
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
  EXPECT_THROW(opt.state(param()), Error);
}

TEST(Optimizer, StepWithClosureReturnsLoss) {
  Tensor p = param(DType::Float64, {3.0});
  SGD opt({p}, {.lr = 0.25});
  Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = (p * p).sum();
    l.backward();
    return l;
  });
  EXPECT_DOUBLE_EQ(loss.item(), 9.0);
  EXPECT_DOUBLE_EQ(p.item(), 3.0 - 0.25 * 6.0);
}

TEST(Adam, MatchesFormulaFirstSteps) {
  Tensor p = param();
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8;
  Adam opt({p}, {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps});
  std::vector<double> m(4), v(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g, int t) {
        for (size_t i = 0; i < x.size(); ++i) {
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          const double mh = m[i] / (1 - std::pow(b1, t)), vh = v[i] / (1 - std::pow(b2, t));
          x[i] -= lr * mh / (std::sqrt(vh) + eps);
        }
      },
      3, 1e-12);
  // The very first Adam step moves each element by about lr (m̂/sqrt(v̂) = sign(g)).
  EXPECT_EQ(opt.find_state(p)->step, 3);
  EXPECT_EQ(opt.name(), "Adam");
}

TEST(Adam, L2WeightDecayAmsgradMaximize) {
  Tensor p = param();
  const double lr = 0.02, b1 = 0.8, b2 = 0.9, eps = 1e-6, wd = 0.1;
  Adam opt({p},
           {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps, .weight_decay = wd, .amsgrad = true, .maximize = true});
  std::vector<double> m(4), v(4), vmax(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g0, int t) {
        for (size_t i = 0; i < x.size(); ++i) {
          const double g = -g0[i] + wd * x[i];
          m[i] = b1 * m[i] + (1 - b1) * g;
          v[i] = b2 * v[i] + (1 - b2) * g * g;
          vmax[i] = std::max(vmax[i], v[i]);
          const double denom = std::sqrt(vmax[i]) / std::sqrt(1 - std::pow(b2, t)) + eps;
          x[i] -= lr / (1 - std::pow(b1, t)) * m[i] / denom;
        }
      },
      3, 1e-12);
  EXPECT_NE(opt.find_state(p)->find("max_exp_avg_sq"), nullptr);
}

TEST(AdamW, DecoupledDecayDiffersFromL2) {
  Tensor p = param(), q = param();
  const double lr = 0.01, wd = 0.5, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  AdamW opt({p}, {.lr = lr, .weight_decay = wd});
  EXPECT_EQ(opt.name(), "AdamW");
  EXPECT_EQ(AdamW({q}).param_groups()[0].options.at("weight_decay"), 1e-2);  // PyTorch's default
  std::vector<double> m(4), v(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g, int t) {
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] *= 1 - lr * wd;
          m[i] = b1 * m[i] + (1 - b1) * g[i];
          v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
          x[i] -= lr / (1 - std::pow(b1, t)) * m[i] / (std::sqrt(v[i]) / std::sqrt(1 - std::pow(b2, t)) + eps);
        }
      },
      3, 1e-12);
  // Adam with the same weight_decay (coupled, L2) lands elsewhere.
  Adam l2({q}, {.lr = lr, .weight_decay = wd});
  for (int t = 1; t <= 3; ++t) {
    set_grads(q, t);
    l2.step();
  }
  EXPECT_GT(std::abs(q.to_vector<double>()[3] - p.to_vector<double>()[3]), 1e-4);
}

TEST(Adam, Errors) {
  Tensor p = param();
  EXPECT_TRUE(has(error_of([&] { Adam({p}, {.beta1 = 1.0}); }), "beta1"));
  EXPECT_TRUE(has(error_of([&] { Adam({p}, {.eps = -1}); }), "eps"));
  EXPECT_TRUE(has(error_of([&] { AdamW({p}, {.weight_decay = -1}); }), "weight_decay"));
}

TEST(RMSprop, PlainMatchesFormula) {
  Tensor p = param();
  const double lr = 0.01, alpha = 0.9, eps = 1e-8;
  RMSprop opt({p}, {.lr = lr, .alpha = alpha, .eps = eps});
  std::vector<double> s(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g, int) {
        for (size_t i = 0; i < x.size(); ++i) {
          s[i] = alpha * s[i] + (1 - alpha) * g[i] * g[i];
          x[i] -= lr * g[i] / (std::sqrt(s[i]) + eps);
        }
      },
      3, 1e-12);
}

TEST(RMSprop, CenteredMomentumWeightDecay) {
  Tensor p = param();
  const double lr = 0.01, alpha = 0.95, eps = 1e-6, mom = 0.5, wd = 0.2;
  RMSprop opt({p}, {.lr = lr, .alpha = alpha, .eps = eps, .weight_decay = wd, .momentum = mom, .centered = true});
  std::vector<double> s(4), a(4), b(4);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g0, int) {
        for (size_t i = 0; i < x.size(); ++i) {
          const double g = g0[i] + wd * x[i];
          s[i] = alpha * s[i] + (1 - alpha) * g * g;
          a[i] = alpha * a[i] + (1 - alpha) * g;
          const double avg = std::sqrt(s[i] - a[i] * a[i]) + eps;
          b[i] = mom * b[i] + g / avg;
          x[i] -= lr * b[i];
        }
      },
      3, 1e-10);
  const ParamState* st = opt.find_state(p);
  EXPECT_NE(st->find("grad_avg"), nullptr);
  EXPECT_NE(st->find("momentum_buffer"), nullptr);
}

TEST(Adagrad, DecayInitialAccumulatorWeightDecay) {
  Tensor p = param();
  const double lr = 0.1, decay = 0.5, init = 0.25, wd = 0.1, eps = 1e-10;
  Adagrad opt({p}, {.lr = lr, .lr_decay = decay, .weight_decay = wd, .initial_accumulator_value = init});
  // The accumulator exists before the first step, filled with the initial value.
  EXPECT_EQ(opt.find_state(p)->find("sum")->to_vector<double>(), std::vector<double>(4, init));
  std::vector<double> s(4, init);
  check_steps(
      opt, p,
      [&](std::vector<double>& x, const std::vector<double>& g0, int t) {
        const double clr = lr / (1 + (t - 1) * decay);
        for (size_t i = 0; i < x.size(); ++i) {
          const double g = g0[i] + wd * x[i];
          s[i] += g * g;
          x[i] -= clr * g / (std::sqrt(s[i]) + eps);
        }
      },
      3, 1e-12);
  EXPECT_TRUE(has(error_of([&] { Adagrad({param()}, {.lr_decay = -1}); }), "lr_decay"));
}

TEST(Optimizer, StateDictRoundTripContinuesIdentically) {
  Tensor p = param(DType::Float32), q = param(DType::Float32);
  Adam a({p}, {.lr = 0.05, .amsgrad = true});
  for (int t = 1; t <= 2; ++t) {
    set_grads(p, t);
    a.step();
  }
  OptimizerState s = a.state_dict();
  EXPECT_EQ(s.optimizer, "Adam");
  ASSERT_EQ(s.groups.size(), 1u);
  EXPECT_EQ(s.groups[0].at("lr"), 0.05);
  ASSERT_EQ(s.params[0].size(), 1u);
  EXPECT_EQ(s.params[0][0].step, 2);
  EXPECT_EQ(s.params[0][0].tensors.size(), 3u);
  EXPECT_EQ(s.params[0][0].tensors[0].first, "exp_avg");

  {
    NoGradGuard ng;
    q.copy_(p);
  }
  Adam b({q}, {.lr = 0.9});
  b.load_state_dict(s);
  EXPECT_EQ(b.param_groups()[0].options.at("lr"), 0.05);
  // Loaded state is a copy: stepping a must not move b's moments.
  set_grads(p, 3);
  a.step();
  set_grads(q, 3);
  b.step();
  EXPECT_EQ(p.to_vector<float>(), q.to_vector<float>());
  EXPECT_EQ(b.find_state(q)->step, 3);
}

TEST(Optimizer, StateFollowsAModuleMovedToAnotherDtype) {
  Tensor p = param(DType::Float32);
  nn::Module m;
  m.register_parameter("p", &p);
  Adam opt(m.parameters(), {.lr = 0.1});
  set_grads(p, 1);
  opt.step();
  EXPECT_EQ(opt.find_state(p)->find("exp_avg")->dtype(), DType::Float32);
  m.to(DType::Float64);  // same tensor, new dtype: the optimizer still holds it
  EXPECT_EQ(p.dtype(), DType::Float64);
  const std::vector<double> before = p.to_vector<double>();
  set_grads(p, 2);
  opt.step();
  EXPECT_EQ(opt.find_state(p)->find("exp_avg")->dtype(), DType::Float64);
  EXPECT_EQ(opt.find_state(p)->step, 2);
  EXPECT_NE(p.to_vector<double>(), before);
}

TEST(Optimizer, LoadStateDictReportsEveryMismatch) {
  Tensor p = param(), q = param(DType::Float64, {1.0, 2.0});
  SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
  set_grads(p, 1);
  sgd.step();
  OptimizerState s = sgd.state_dict();
  Adam adam({p});
  EXPECT_TRUE(has(error_of([&] { adam.load_state_dict(s); }), "the state is for SGD, not Adam"));
  SGD two(std::vector<ParamGroup>{{{p}, {}}, {{q}, {}}});
  EXPECT_TRUE(has(error_of([&] { two.load_state_dict(s); }), "1 parameter groups, the optimizer has 2"));
  SGD other({q}, {.momentum = 0.9});
  s.groups[0]["bogus"] = 1;
  std::string msg = error_of([&] { other.load_state_dict(s); });
  EXPECT_TRUE(has(msg, "2 error(s)")) << msg;
  EXPECT_TRUE(has(msg, "unknown hyperparameter 'bogus'")) << msg;
  EXPECT_TRUE(has(msg, "'momentum_buffer': shape [4] does not match the parameter's [2]")) << msg;
}

TEST(ClipGrad, NormClipsAndReturnsTotal) {
  Tensor a = param(DType::Float64, {3.0}), b = param(DType::Float64, {0.0, 4.0}), c = param();
  a.set_grad(tensor({3.0}, {.dtype = DType::Float64}));
  b.set_grad(tensor({0.0, -4.0}, {.dtype = DType::Float64}));
  // c has no gradient and is skipped.
  double total = clip_grad_norm_({a, b, c}, 1.0);
  EXPECT_DOUBLE_EQ(total, 5.0);
  const double coef = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(a.grad().item(), 3.0 * coef, 1e-15);
  EXPECT_NEAR(b.grad().to_vector<double>()[1], -4.0 * coef, 1e-15);
  // Already small: unchanged, and the returned norm is the current one.
  total = nn::utils::clip_grad_norm_({a, b}, 10.0);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_NEAR(a.grad().item(), 3.0 * coef, 1e-15);
}

// A model spread over two processes (a pipeline's stages): each clips its own gradients with the
// other's part of the norm added by `combine`, and both end as clipping the whole model would.
TEST(ClipGrad, CombineClipsOverTheWholeModel) {
  auto make = [](double x, double y) {
    Tensor t = param(DType::Float64, {0.0, 0.0});
    t.set_grad(tensor({x, y}, {.dtype = DType::Float64}));
    return t;
  };
  Tensor a = make(3.0, 0.0), b = make(0.0, 4.0), wa = make(3.0, 0.0), wb = make(0.0, 4.0);
  const double whole = clip_grad_norm_({wa, wb}, 1.0);
  int calls = 0;
  const double total = clip_grad_norm_({a}, 1.0, 2.0, false, [&](double part, bool is_max) {
    ++calls;
    EXPECT_FALSE(is_max);
    EXPECT_DOUBLE_EQ(part, 9.0);  // this process's sum of squares
    return part + 16.0;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(total, whole);
  EXPECT_EQ(a.grad().to_vector<double>(), wa.grad().to_vector<double>());
  // Max norm: the parts are combined by max.
  Tensor c = make(-7.0, 1.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm_({c}, 100.0, INFINITY, false,
                                   [&](double part, bool is_max) {
                                     EXPECT_TRUE(is_max);
                                     return std::max(part, 9.0);
                                   }),
                   9.0);
  // A process without gradients (a stage of pooling layers) still takes part.
  calls = 0;
  EXPECT_DOUBLE_EQ(clip_grad_norm_({param()}, 1.0, 2.0, false,
                                   [&](double part, bool) {
                                     ++calls;
                                     return part + 25.0;
                                   }),
                   5.0);
  EXPECT_EQ(calls, 1);
}

TEST(ClipGrad, InfAndOneNormAndNonFinite) {
  Tensor a = param(DType::Float32, {0, 0, 0});
  a.set_grad(tensor({1.0, -6.0, 2.0}));
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a}, 100.0, INFINITY), 6.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm_({a}, 100.0, 1.0), 9.0);
  EXPECT_NEAR(clip_grad_norm_({a}, 3.0, INFINITY), 6.0, 1e-6);
  EXPECT_NEAR(a.grad().to_vector<float>()[1], -3.0, 1e-5);
  a.set_grad(tensor({1.0, NAN, 2.0}));
  EXPECT_TRUE(std::isnan(clip_grad_norm_({a}, 1.0, INFINITY)));
  EXPECT_TRUE(has(error_of([&] { clip_grad_norm_({a}, 1.0, 2.0, true); }), "non-finite"));
  EXPECT_THROW(clip_grad_norm_({a}, 1.0, -1.0), Error);
  EXPECT_EQ(clip_grad_norm_({param()}, 1.0), 0.0);  // no gradients at all
}

TEST(ClipGrad, ValueClampsStridedGradientsToo) {
  Tensor a = param(DType::Float32, {0, 0, 0, 0});
  a.set_grad(tensor({-5.0, 0.5, 2.0, -0.1}));
  clip_grad_value_({a}, 1.0);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{-1.0f, 0.5f, 1.0f, -0.1f}));
  // A non-contiguous gradient is written back through a copy.
  Tensor w = zeros({2, 2}, {.requires_grad = true});
  w.set_grad(tensor({{3.0, -3.0}, {0.5, 9.0}}).t());
  clip_grad_value_({w}, 2.0);
  EXPECT_EQ(w.grad().contiguous().to_vector<float>(), (std::vector<float>{2.0f, 0.5f, -2.0f, 2.0f}));
  EXPECT_THROW(clip_grad_value_({a}, -1.0), Error);
}
