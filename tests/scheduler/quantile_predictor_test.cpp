// The quantile predictor (a small model trained with Ember while the trace runs): its starting
// point is the history predictor, its loss has the hand values and gradient of the pinball loss,
// training improves on the group median where that fails, it is deterministic from its seed, and its
// options are checked.
#include "scheduler/learned/quantile_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/ops/creation.h"
#include "scheduler/sim/simulator.h"

namespace ember::sched::learned {
namespace {

// A stream of jobs in two queues, one every 10 min, each told finished 1 s after its submission
// (the run time is only a number to the predictor). Queue "a" runs 100 s by day (hours 0-12) and
// 10,000 s by night; queue "b" runs about 1,000 s. `ask` sees each job before it is told.
template <class Ask, class Tell>
void stream(int days, uint64_t seed, Ask ask, Tell tell) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.8, 1.25);
  for (int i = 0; i < days * 144; ++i) {
    const double t = 600.0 * i;
    const bool a = rng() % 2;
    const SubmitFeatures f{a ? "a" : "b", a ? 1 : 4, t};
    const double run = (a ? (std::fmod(t, 86400) < 43200 ? 100 : 10000) : 1000) * jitter(rng);
    ask(f, run);
    tell(f, run, t + 1);
  }
}

TEST(QuantileNet, UntrainedEveryQuantileIsTheHistoryAnswer) {
  QuantileNet net(16, 3);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1, 2);
  std::vector<float> x(7 * kQuantileInputs);
  for (float& v : x) v = u(rng);
  NoGradGuard guard;
  const std::vector<float> y = net.forward(from_vector(x, {7, kQuantileInputs})).to_vector<float>();
  ASSERT_EQ(y.size(), 7u * kQuantiles);
  for (int r = 0; r < 7; ++r)
    for (int q = 0; q < kQuantiles; ++q) EXPECT_EQ(y[r * kQuantiles + q], x[r * kQuantileInputs]) << r << "," << q;
  EXPECT_THROW(net.forward(from_vector(x, {1, 7 * kQuantileInputs})), Error);
}

TEST(QuantilePredictor, AnswersAsTheHistoryPredictorUntilItsFirstFit) {
  QuantilePredictor q({.refit = 100000});
  HistoryPredictor h;
  stream(
      2, 11, [&](const SubmitFeatures& f, double) { ASSERT_EQ(q.predict(f), h.predict(f)); },
      [&](const SubmitFeatures& f, double run, double at) {
        q.observe(f, run, at);
        h.observe(f, run, at);
      });
  EXPECT_EQ(q.fits(), 0);
}

TEST(PinballLoss, HandValues) {
  const TensorOptions f64{.dtype = DType::Float64};
  auto loss = [&](double q, double y) {
    return pinball_loss(full({1, kQuantiles}, q, f64), full({1, 1}, y, f64)).item();
  };
  // Under-predicting by 1 costs each level t, over-predicting costs 1 - t: the levels sum to 2.5.
  EXPECT_DOUBLE_EQ(loss(0, 1), 0.1 + 0.25 + 0.5 + 0.75 + 0.9);
  EXPECT_DOUBLE_EQ(loss(0, -1), 0.9 + 0.75 + 0.5 + 0.25 + 0.1);
  EXPECT_DOUBLE_EQ(loss(0.5, 1), 1.25);
  EXPECT_DOUBLE_EQ(loss(2, 2), 0);
  // Rows average: (2.5 + 0) / 2.
  EXPECT_DOUBLE_EQ(pinball_loss(from_vector(std::vector<double>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1}, {2, kQuantiles}, f64),
                                from_vector(std::vector<double>{1, 1}, {2, 1}, f64))
                       .item(),
                   1.25);
  EXPECT_THROW(pinball_loss(full({2, kQuantiles}, 0.0), full({3, 1}, 0.0)), Error);
  EXPECT_THROW(pinball_loss(full({2, 3}, 0.0), full({2, 1}, 0.0)), Error);
}

// Float64 gradient check against central differences, away from the kinks (|y - q| > 1e-3).
TEST(PinballLoss, GradientMatchesFiniteDifferencesInFloat64) {
  const TensorOptions f64{.dtype = DType::Float64};
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> u(-2, 2);
  const int n = 6;
  std::vector<double> q(n * kQuantiles), y(n);
  for (double& v : y) v = u(rng);
  for (size_t i = 0; i < q.size(); ++i) {
    do q[i] = u(rng);
    while (std::abs(q[i] - y[i / kQuantiles]) < 1e-2);
  }
  Tensor qt = from_vector(q, {n, kQuantiles}, f64).requires_grad_(true);
  pinball_loss(qt, from_vector(y, {n, 1}, f64)).backward();
  const std::vector<double> g = qt.grad().to_vector<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < q.size(); ++i) {
    std::vector<double> up = q, down = q;
    up[i] += h;
    down[i] -= h;
    const double num = (pinball_loss(from_vector(up, {n, kQuantiles}, f64), from_vector(y, {n, 1}, f64)).item() -
                        pinball_loss(from_vector(down, {n, kQuantiles}, f64), from_vector(y, {n, 1}, f64)).item()) /
                       (2 * h);
    EXPECT_NEAR(g[i], num, 1e-8) << "element " << i;
  }
}

// Queue a's window of recent run times mixes its day and night runs (a factor of 100 apart), so
// the history's median is wrong by about that factor for most of a's jobs; the model sees the
// window's quantiles, how full it is, and the hour of the day, and training must turn that into a
// far better answer over the last two of six days. (With steps = 0 the model is the history
// predictor and this fails: tried.)
TEST(QuantilePredictor, TrainingDoesFarBetterWhereTheGroupMedianFails) {
  QuantilePredictor q({.refit = 64, .steps = 60});
  HistoryPredictor h;
  std::vector<double> qp, hp, truth;
  stream(
      6, 3,
      [&](const SubmitFeatures& f, double run) {
        const double a = q.predict(f), b = h.predict(f);
        if (f.queue == "a" && f.submit >= 4 * 86400) {
          qp.push_back(a);
          hp.push_back(b);
          truth.push_back(run);
        }
      },
      [&](const SubmitFeatures& f, double run, double at) {
        q.observe(f, run, at);
        h.observe(f, run, at);
      });
  ASSERT_GT(q.fits(), 5);
  EXPECT_LT(q.loss_after(), q.loss_before() + 1e-6);
  const double model = median_abs_log_error(qp, truth), history = median_abs_log_error(hp, truth);
  EXPECT_GT(history, 1.0);  // the case is what it claims: the median is far off
  EXPECT_LT(model, 0.5 * history) << "model " << model << ", history " << history;
}

TEST(QuantilePredictor, QuantilesAscendAndARunningJobIsPredictedPastWhatItRan) {
  QuantilePredictor q({.refit = 32});
  stream(
      2, 9, [](const SubmitFeatures&, double) {},
      [&](const SubmitFeatures& f, double run, double at) { q.observe(f, run, at); });
  ASSERT_GT(q.fits(), 0);
  const SubmitFeatures f{"a", 1, 2 * 86400.0};
  const auto s = q.quantiles(f);
  for (int i = 1; i < kQuantiles; ++i) EXPECT_LE(s[i - 1], s[i]);
  for (double ran : {0.0, s[0], s[2] * 1.01, s[kQuantiles - 1] * 3}) {
    const double p = q.predict_given(f, f.submit + ran, ran);
    EXPECT_GT(p, ran) << "ran " << ran;
  }
}

TEST(QuantilePredictor, SameSeedSameAnswersBitForBit) {
  auto run = [](uint64_t seed) {
    QuantilePredictor q({.refit = 50, .seed = seed});
    std::vector<double> out;
    stream(
        2, 4, [&](const SubmitFeatures& f, double) { out.push_back(q.predict(f)); },
        [&](const SubmitFeatures& f, double run, double at) { q.observe(f, run, at); });
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(QuantilePredictor, KeepsTheNoFutureRule) {
  QuantilePredictor q;
  q.observe({"a", 1, 0}, 100, 500);
  EXPECT_THROW(q.predict({"a", 1, 400}), Error);
  EXPECT_THROW(q.predict_given({"a", 1, 0}, 499, 10), Error);
}

TEST(QuantilePredictor, OptionsAreChecked) {
  EXPECT_THROW(QuantilePredictor({.quantile = 0.3}), Error);
  EXPECT_THROW(QuantilePredictor({.refit = 0}), Error);
  EXPECT_THROW(QuantilePredictor({.hidden = 0}), Error);
  EXPECT_THROW(QuantilePredictor({.lr = -1}), Error);
  EXPECT_THROW(make_predictor("quantile", {{"quantile.refitt", "5"}}), Error);
  EXPECT_THROW(make_predictor("quantile", {{"quantile.quantile", "0.3"}}), Error);
  EXPECT_THROW(make_predictor("quantile", {{"history.windw", "5"}}), Error);
  EXPECT_THROW(make_predictor("history", {{"quantile.refit", "5"}}), Error);
  EXPECT_EQ(make_predictor("quantile", {{"quantile.quantile", "0.9"}, {"history.window", "8"}})->name(), "quantile");
}

}  // namespace
}  // namespace ember::sched::learned
