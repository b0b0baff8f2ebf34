// Learning-rate schedules: each one's sequence against its closed form (or hand values), the
// optimizer's groups following it, state round trips, and ReduceLROnPlateau's patience,
// threshold and cooldown traced by hand.
#include "layers/optim/lr_scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/ops.h"
#include "layers/optim/adagrad.h"
#include "layers/optim/adam.h"
#include "layers/optim/sgd.h"

using namespace ember;
using namespace ember::optim;

namespace {

Tensor p() {
  return zeros({2}, {.requires_grad = true});
}

// lr of group 0 for epochs 0..n-1 (epoch 0 is the constructor's).
template <typename S>
std::vector<double> run(S& sched, Optimizer& opt, int n) {
  std::vector<double> r{opt.param_groups()[0].options.at("lr")};
  EXPECT_DOUBLE_EQ(sched.get_last_lr()[0], r[0]);
  for (int e = 1; e < n; ++e) {
    sched.step();
    r.push_back(opt.param_groups()[0].options.at("lr"));
    EXPECT_DOUBLE_EQ(sched.get_last_lr()[0], r.back());
  }
  return r;
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "epoch " << i;
}

}  // namespace

TEST(StepLR, HandValues) {
  SGD opt({p()}, {.lr = 1.0});
  StepLR s(opt, 3, 0.5);
  expect_near(run(s, opt, 8), {1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25});
  EXPECT_EQ(s.last_epoch(), 7);
  EXPECT_THROW(StepLR(opt, 0), Error);
}

TEST(MultiStepLR, HandValuesUnsortedMilestonesAndGroups) {
  Tensor a = p(), b = p();
  SGD opt(std::vector<ParamGroup>{{{a}, {}}, {{b}, {{"lr", 10.0}}}}, {.lr = 1.0});
  MultiStepLR s(opt, {5, 2}, 0.1);
  expect_near(run(s, opt, 7), {1, 1, 0.1, 0.1, 0.1, 0.01, 0.01});
  EXPECT_NEAR(opt.param_groups()[1].options.at("lr"), 0.1, 1e-12);
  EXPECT_EQ(s.get_last_lr().size(), 2u);
}

TEST(ExponentialLR, ClosedForm) {
  Adam opt({p()}, {.lr = 0.2});
  ExponentialLR s(opt, 0.9);
  std::vector<double> want;
  for (int e = 0; e < 6; ++e) want.push_back(0.2 * std::pow(0.9, e));
  expect_near(run(s, opt, 6), want);
}

TEST(CosineAnnealingLR, PlainMatchesPyTorchClosedForm) {
  SGD opt({p()}, {.lr = 0.1});
  CosineAnnealingLR s(opt, 10, 0.001);
  std::vector<double> want;
  for (int e = 0; e < 14; ++e) want.push_back(0.001 + (0.1 - 0.001) * (1 + std::cos(std::numbers::pi * e / 10.0)) / 2);
  std::vector<double> got = run(s, opt, 14);
  expect_near(got, want);
  EXPECT_NEAR(got[10], 0.001, 1e-15);  // the bottom at t_max
  EXPECT_NEAR(got[5], 0.0505, 1e-12);
}

TEST(CosineAnnealingLR, LinearWarmupThenCosine) {
  SGD opt({p()}, {.lr = 1.0});
  CosineAnnealingLR s(opt, {.t_max = 8, .eta_min = 0.0, .warmup_steps = 4, .warmup_start_factor = 0.2});
  // warmup: 0.2 + 0.8 * e / 4; then cos over 4 epochs.
  const double c = std::cos(std::numbers::pi / 4), c3 = std::cos(3 * std::numbers::pi / 4);
  expect_near(run(s, opt, 9), {0.2, 0.4, 0.6, 0.8, 1.0, (1 + c) / 2, 0.5, (1 + c3) / 2, 0.0});
  EXPECT_THROW(CosineAnnealingLR(opt, {.t_max = 4, .warmup_steps = 4}), Error);
}

TEST(OneCycleLR, TwoPhasesWithMomentum) {
  SGD opt({p()}, {.lr = 123.0, .momentum = 0.9});
  OneCycleLR s(opt, 1.0, {.total_steps = 10});
  const double init = 1.0 / 25, lo = init / 1e4;
  auto anneal = [](double a, double b, double pct) { return b + (a - b) / 2 * (std::cos(std::numbers::pi * pct) + 1); };
  // Phase 1 ends at step 0.3 * 10 - 1 = 2, phase 2 at 9.
  std::vector<double> want, mom;
  for (int e = 0; e < 10; ++e) {
    want.push_back(e <= 2 ? anneal(init, 1.0, e / 2.0) : anneal(1.0, lo, (e - 2) / 7.0));
    mom.push_back(e <= 2 ? anneal(0.95, 0.85, e / 2.0) : anneal(0.85, 0.95, (e - 2) / 7.0));
  }
  std::vector<double> got{opt.param_groups()[0].options.at("lr")}, gotm{opt.param_groups()[0].options.at("momentum")};
  for (int e = 1; e < 10; ++e) {
    s.step();
    got.push_back(opt.param_groups()[0].options.at("lr"));
    gotm.push_back(opt.param_groups()[0].options.at("momentum"));
  }
  expect_near(got, want);
  expect_near(gotm, mom);
  EXPECT_NEAR(got[0], 0.04, 1e-15);
  EXPECT_NEAR(got[1], 0.52, 1e-12);
  EXPECT_NEAR(got[2], 1.0, 1e-15);
  EXPECT_NEAR(got[9], 4e-6, 1e-18);
  s.step();                       // step 10 == total_steps is still allowed (as in PyTorch)
  EXPECT_THROW(s.step(), Error);  // 11 is not
}

TEST(OneCycleLR, ThreePhaseAdamBeta1AndNoMomentumOptimizer) {
  Adam opt({p()});
  OneCycleLR s(opt, 0.5, {.total_steps = 20, .pct_start = 0.25, .three_phase = true});
  // Phase ends: 4, 8, 19. At step 4 the max, at 8 back to initial, at 19 the minimum.
  std::vector<double> lr = run(s, opt, 20);
  EXPECT_NEAR(lr[4], 0.5, 1e-15);
  EXPECT_NEAR(lr[8], 0.02, 1e-15);
  EXPECT_NEAR(lr[19], 0.02 / 1e4, 1e-18);
  EXPECT_NEAR(opt.param_groups()[0].options.at("beta1"), 0.95, 1e-15);
  Adagrad ada({p()});
  EXPECT_THROW(OneCycleLR(ada, 0.1, {.total_steps = 5}), Error);
  OneCycleLR fine(ada, 0.1, {.total_steps = 5, .cycle_momentum = false});
  EXPECT_NEAR(fine.get_last_lr()[0], 0.004, 1e-15);
}

TEST(LRScheduler, StateDictRestoresPosition) {
  SGD a({p()}, {.lr = 1.0}), b({p()}, {.lr = 1.0});
  StepLR sa(a, 2, 0.5);
  for (int i = 0; i < 5; ++i) sa.step();
  StepLR sb(b, 2, 0.5);
  sb.load_state_dict(sa.state_dict());
  EXPECT_EQ(sb.last_epoch(), 5);
  sa.step();
  sb.step();
  EXPECT_DOUBLE_EQ(sa.get_last_lr()[0], sb.get_last_lr()[0]);
  EXPECT_DOUBLE_EQ(b.param_groups()[0].options.at("lr"), 0.125);
  EXPECT_THROW(sb.load_state_dict({{"last_epoch", 1}}), Error);
}

TEST(ReduceLROnPlateau, PatienceCooldownMinLr) {
  SGD opt({p()}, {.lr = 1.0});
  ReduceLROnPlateau s(opt, {.factor = 0.5, .patience = 1, .cooldown = 1, .min_lr = 0.2});
  // 1: 1.0 best | 2: bad 1 | 3: bad 2 > patience -> 0.5, cooldown 1 | 4: cooldown (bad reset) | 5: bad 1
  // | 6: bad 2 -> 0.25 | 7: 0.5 better, the cooldown ends | 8: bad 1 | 9: bad 2 -> max(0.125, min_lr) = 0.2
  // | 10: cooldown | 11: bad 1 | 12: bad 2, but 0.2 is already the minimum.
  std::vector<double> metrics{1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  std::vector<double> want{1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2};
  std::vector<double> got;
  for (double m : metrics) {
    s.step(m);
    got.push_back(s.get_last_lr()[0]);
  }
  expect_near(got, want);
  EXPECT_EQ(s.best(), 0.5);
}

TEST(ReduceLROnPlateau, ThresholdModesAndMax) {
  SGD opt({p()}, {.lr = 1.0});
  // Relative threshold 10%: 0.95 after 1.0 is not an improvement in min mode.
  ReduceLROnPlateau rel(opt, {.patience = 0, .threshold = 0.1});
  rel.step(1.0);
  rel.step(0.95);
  EXPECT_NEAR(rel.get_last_lr()[0], 0.1, 1e-15);

  SGD opt2({p()}, {.lr = 1.0});
  ReduceLROnPlateau abs(opt2, {.mode = ReduceLROnPlateauOptions::Mode::Max,
                               .patience = 0,
                               .threshold = 0.5,
                               .threshold_mode = ReduceLROnPlateauOptions::ThresholdMode::Abs});
  abs.step(1.0);
  abs.step(1.6);  // +0.6 > 0.5: better
  EXPECT_EQ(abs.get_last_lr()[0], 1.0);
  abs.step(2.0);  // +0.4: not better
  EXPECT_NEAR(abs.get_last_lr()[0], 0.1, 1e-15);
  EXPECT_EQ(abs.best(), 1.6);

  SGD opt3({p()}, {.lr = 1.0});
  ReduceLROnPlateau c(opt3, {.patience = 2});
  for (double m : {3.0, 4.0, 5.0}) c.step(m);
  ReduceLROnPlateau d(opt3, {.patience = 2});
  d.load_state_dict(c.state_dict());
  EXPECT_EQ(d.num_bad_epochs(), 2);
  d.step(6.0);
  EXPECT_NEAR(d.get_last_lr()[0], 0.1, 1e-15);
  EXPECT_THROW(ReduceLROnPlateau(opt3, {.factor = 1.0}), Error);
}
