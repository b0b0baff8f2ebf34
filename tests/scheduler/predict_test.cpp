// Duration prediction: the history predictor's hand values, its no-future rule, and a replay of a
// trace through the simulator that checks no prediction depends on a job that had not finished.
#include "scheduler/predict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <random>

#include "core/error.h"
#include "scheduler/sim/simulator.h"
#include "tests/scheduler/sched_test_util.h"

namespace ember::sched {
namespace {

SubmitFeatures f(const std::string& q, int gpus, double submit) {
  return {q, gpus, submit};
}

TEST(HistoryPredictor, MostSpecificGroupWithEnoughHistoryAnswers) {
  HistoryPredictor p({.quantile = 0.5, .window = 4, .min_samples = 2, .prior = 777});
  EXPECT_DOUBLE_EQ(p.predict(f("a", 1, 0)), 777);  // nothing finished yet
  p.observe(f("a", 1, 0), 100, 10);
  EXPECT_DOUBLE_EQ(p.predict(f("a", 1, 10)), 777);  // one job is below min_samples everywhere
  p.observe(f("a", 1, 0), 300, 20);
  p.observe(f("b", 4, 0), 1000, 30);
  p.observe(f("b", 4, 0), 3000, 40);
  EXPECT_DOUBLE_EQ(p.predict(f("a", 1, 40)), 200);   // queue a, 1 GPU: median of 100, 300
  EXPECT_DOUBLE_EQ(p.predict(f("a", 4, 40)), 200);   // no (a, 4) history: queue a
  EXPECT_DOUBLE_EQ(p.predict(f("c", 4, 40)), 2000);  // unknown queue: 4-GPU jobs
  EXPECT_DOUBLE_EQ(p.predict(f("c", 2, 40)), 650);   // neither: every job, median of four
  // The window keeps the 4 newest of a group: two 2-GPU jobs push 100 and 300 out of "every job"
  // while (a, 1) still holds them.
  p.observe(f("a", 2, 0), 50, 50);
  p.observe(f("a", 2, 0), 50, 60);
  EXPECT_DOUBLE_EQ(p.predict(f("c", 2, 60)), 50);   // the 2-GPU jobs
  EXPECT_DOUBLE_EQ(p.predict(f("c", 8, 60)), 525);  // every job: median of 1000, 3000, 50, 50
  EXPECT_DOUBLE_EQ(p.predict(f("a", 1, 60)), 200);
}

TEST(HistoryPredictor, NeverAnswersBelowOneSecond) {
  HistoryPredictor p({.min_samples = 1});
  p.observe(f("a", 1, 0), 0, 5);
  EXPECT_DOUBLE_EQ(p.predict(f("a", 1, 5)), 1.0);
}

TEST(HistoryPredictor, RefusesHistoryFromTheFuture) {
  HistoryPredictor p;
  p.observe(f("a", 1, 0), 100, 500);
  try {
    p.predict(f("a", 1, 400));
    FAIL() << "a prediction at t=400 after a finish at t=500 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("leaking history from the future"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p.observe(f("a", 1, 0), 100, 450), Error);    // finishes out of order
  EXPECT_THROW(p.observe(f("a", 1, 600), 100, 550), Error);  // finished before it was submitted
  EXPECT_THROW(p.observe(f("a", 1, 0), -1, 700), Error);
  // Asking again about a running job follows the same rule, at the moment of asking.
  EXPECT_THROW(p.predict_given(f("a", 1, 0), 499, 10), Error);
  EXPECT_THROW(p.predict_given(f("a", 1, 900), 800, 10), Error);  // asked before its submission
  EXPECT_THROW(p.predict_given(f("a", 1, 0), 900, -1), Error);
}

TEST(HistoryPredictor, AJobThatOutlivedItsPredictionGetsTheLongerRunsOfItsGroup) {
  HistoryPredictor p({.quantile = 0.5, .window = 8, .min_samples = 2});
  for (double r : {100.0, 200.0, 1000.0, 3000.0}) p.observe(f("a", 1, 0), r, 10);
  EXPECT_DOUBLE_EQ(p.predict_given(f("a", 1, 0), 20, 150), 1000);    // median of 200, 1000, 3000
  EXPECT_DOUBLE_EQ(p.predict_given(f("a", 1, 0), 20, 5000), 10000);  // past all history: twice as long
}

// The predictor keeps each group's window sorted as it learns; its answers must be those of the
// rule read plainly: the quantile of the window (or of its times longer than the job has run),
// from the first group with enough of them. Random histories with windows that overflow.
TEST(HistoryPredictor, AnswersAsTheRuleReadPlainlyOnRandomHistories) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    HistoryOptions o;
    o.window = 1 + static_cast<int>(rng() % 12);
    o.min_samples = 1 + static_cast<int>(rng() % o.window);
    o.quantile = (rng() % 5) / 4.0;
    HistoryPredictor pred(o);
    std::map<std::string, std::deque<double>> window;  // the rule's own bookkeeping
    auto plain = [&](const SubmitFeatures& f, double ran) -> std::optional<double> {
      for (const std::string& k : history_groups(f.queue, f.gpus)) {
        std::vector<double> v;
        for (double x : window[k])
          if (x > ran) v.push_back(x);
        if (static_cast<int>(v.size()) >= o.min_samples) return percentile(v, o.quantile);
      }
      return std::nullopt;
    };
    double t = 0;
    for (int step = 0; step < 300; ++step) {
      const SubmitFeatures f{std::string(1, static_cast<char>('a' + rng() % 3)), 1 + static_cast<int>(rng() % 3), t};
      t += 1;
      if (rng() % 2) {
        const double run = static_cast<double>(rng() % 50);  // repeats, so equal times leave the window too
        pred.observe(f, run, t);
        for (const std::string& k : history_groups(f.queue, f.gpus)) {
          window[k].push_back(run);
          if (static_cast<int>(window[k].size()) > o.window) window[k].pop_front();
        }
      } else {
        const std::optional<double> all = plain(f, -1);
        ASSERT_DOUBLE_EQ(pred.predict(f), std::max(all ? *all : o.prior, 1.0)) << "trial " << trial;
        const double ran = static_cast<double>(rng() % 40);
        const std::optional<double> longer = plain(f, ran);
        ASSERT_DOUBLE_EQ(pred.predict_given(f, t, ran), std::max(longer ? *longer : 2 * ran, ran + 1))
            << "trial " << trial;
        // The same through groups looked up once (the learned policy's features ask that way).
        ASSERT_EQ(pred.predict_given(pred.groups(f), f, t, ran), pred.predict_given(f, t, ran)) << "trial " << trial;
      }
    }
  }
}

TEST(HistoryPredictor, ParametersAreChecked) {
  EXPECT_THROW(make_predictor("history", {{"history.quantile", "2"}}), Error);
  EXPECT_THROW(make_predictor("history", {{"history.windw", "5"}}), Error);
  EXPECT_THROW(make_predictor("oracle"), Error);
  EXPECT_THROW(HistoryPredictor({.window = 2, .min_samples = 3}), Error);
}

TEST(MedianAbsLogError, HandValues) {
  EXPECT_DOUBLE_EQ(median_abs_log_error({100, 200, 50}, {100, 100, 100}), std::log(2.0));
  EXPECT_DOUBLE_EQ(median_abs_log_error({1}, {1}), 0.0);
  EXPECT_THROW(median_abs_log_error({1, 2}, {1}), Error);
}

// Answers with the mean run time of the queue's finished jobs, so that every finish moves later
// answers.
class QueueMean final : public DurationPredictor {
 public:
  std::string name() const override { return "queue-mean"; }

 private:
  void learn(const SubmitFeatures& x, double run_time, double) override {
    sum_[x.queue] += run_time;
    count_[x.queue] += 1;
  }
  double guess(const SubmitFeatures& x) override { return count_[x.queue] ? sum_[x.queue] / count_[x.queue] : 100; }
  std::map<std::string, double> sum_, count_;
};

// Passes everything to another predictor and records the predictions made at submission.
class Recorder final : public DurationPredictor {
 public:
  explicit Recorder(std::unique_ptr<DurationPredictor> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "recorder of " + inner_->name(); }
  std::map<double, std::vector<double>> answers;  // submit time -> predictions made for it

 private:
  void learn(const SubmitFeatures& x, double run_time, double finish) override { inner_->observe(x, run_time, finish); }
  double guess(const SubmitFeatures& x) override {
    const double p = inner_->predict(x);
    answers[x.submit].push_back(p);
    return p;
  }
  double guess_given(const SubmitFeatures& x, double now, double ran) override {
    return inner_->predict_given(x, now, ran);
  }
  std::unique_ptr<DurationPredictor> inner_;
};

// The predictors the causality test runs: one whose every answer moves with each finish, and the
// two built in (the quantile one refitted every 8 finishes, so that it trains many times).
std::unique_ptr<DurationPredictor> inner_predictor(const std::string& name) {
  if (name == "queue-mean") return std::make_unique<QueueMean>();
  return make_predictor(name, name == "quantile" ? PolicyParams{{"quantile.refit", "8"}} : PolicyParams{});
}

// 120 jobs, one every 30 s, of 1, 2 or 4 GPUs, 30 s to 3 h, in three queues (a fixed LCG).
std::vector<JobSpec> random_trace() {
  std::vector<JobSpec> t;
  unsigned long long x = 12345;
  auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int i = 0; i < 120; ++i) {
    double duration = std::round(30 * std::pow(360.0, (next() % 1000) / 1000.0));
    JobSpec j = testing::job(std::string("j").append(std::to_string(i)), 30.0 * i, 1 << (next() % 3), duration);
    j.queue = std::string(1, static_cast<char>('a' + next() % 3));
    t.push_back(j);
  }
  return t;
}

// Causality: what is decided and predicted at time t may depend only on jobs that finished by t.
// So making every job that had not finished by t very long, in a scrambled order, must leave every
// start before t and every prediction made up to t unchanged, under policies that rank by the
// predictions (a leak of true durations to the policy would reorder the unfinished jobs' starts).
TEST(PredictedEstimates, NoPredictionReadsAJobThatHadNotFinished) {
  std::vector<JobSpec> trace = random_trace();
  for (const char* predictor : {"queue-mean", "history", "quantile"})
    for (const char* policy : {"srsf", "sjf"}) {
      SCOPED_TRACE(predictor);
      auto first = make_policy(policy);
      Recorder r1(inner_predictor(predictor));
      SimOptions o1;
      o1.predictor = &r1;
      SimResult a = simulate(trace, Topology::uniform(4, 0), *first, o1);
      EXPECT_EQ(a.knows, "predictions");
      ASSERT_GE(a.prediction_error, 0);
      const double cut = trace[trace.size() / 2].submit;
      std::vector<JobSpec> changed = trace;
      int touched = 0;
      for (size_t i = 0; i < changed.size(); ++i) {
        if (a.jobs[i].finish <= cut) continue;
        changed[i].duration = 1e6 + 997.0 * ((i * 37) % 101);  // outlasts the cut, in another order
        ++touched;
      }
      ASSERT_GT(touched, 0);
      auto second = make_policy(policy);
      Recorder r2(inner_predictor(predictor));
      SimOptions o2;
      o2.predictor = &r2;
      SimResult b = simulate(changed, Topology::uniform(4, 0), *second, o2);
      for (const auto& [t, ps] : r1.answers) {
        if (t > cut) break;
        EXPECT_EQ(r2.answers[t], ps) << policy << ": predictions for jobs submitted at t=" << t << " changed";
      }
      int started = 0;
      for (size_t i = 0; i < trace.size(); ++i) {
        if (std::min(a.jobs[i].first_start, b.jobs[i].first_start) >= cut) continue;
        EXPECT_EQ(a.jobs[i].first_start, b.jobs[i].first_start) << policy << ": job " << trace[i].name;
        ++started;
      }
      EXPECT_GT(started, 10);
    }
}

TEST(PredictedEstimates, ThePolicySeesNoDuration) {
  // Two jobs on one device, the long one first: SRSF with the truth runs the short one first when
  // both wait; with predictions and no history both look alike and submission order decides.
  std::vector<JobSpec> t = {testing::job("long", 0, 1, 1000), testing::job("short", 0, 1, 10)};
  auto p = make_policy("srsf");
  HistoryPredictor h;
  SimOptions o;
  o.predictor = &h;
  auto j = testing::jcts(simulate(t, Topology::uniform(1, 0), *p, o));
  EXPECT_DOUBLE_EQ(j["long"], 1000);
  EXPECT_DOUBLE_EQ(j["short"], 1010);
  EXPECT_DOUBLE_EQ(testing::jcts(testing::run("srsf", t, 1))["short"], 10);
}

}  // namespace
}  // namespace ember::sched
