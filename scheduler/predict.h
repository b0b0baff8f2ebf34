// Duration prediction from what a scheduler sees when a job is submitted: its queue (team or
// virtual cluster), its gang size, the submission time, and the run times of the jobs that have
// *finished* so far. Philly's jobs repeat within a virtual cluster (the same experiment submitted
// again with other settings), so the recent run times of a queue's jobs of the same size are a
// good guess, and one that a real scheduler can make. The driver (the simulator, the daemon) feeds
// finished jobs in the order they finish and asks for predictions at submission time; a predictor
// refuses a question about a moment before the newest finish it was told of, so a driver that
// leaks the future fails instead of looking clever.
#pragma once

#include <array>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/policy.h"

namespace ember::sched {

// What is known of a job at submission: never its duration.
struct SubmitFeatures {
  std::string queue;
  int gpus = 1;
  double submit = 0;  // seconds on the driver's clock
};

class DurationPredictor {
 public:
  virtual ~DurationPredictor() = default;
  virtual std::string name() const = 0;
  // A job that finished at `finish` after `run_time` seconds of work (repeated work excluded).
  // Calls come in finish order; an earlier finish than the last one told is an ember::Error.
  void observe(const SubmitFeatures& f, double run_time, double finish);
  // Predicted run time in seconds (> 0) of a job submitted at f.submit; f.submit before the newest
  // observed finish is an ember::Error (the history would come from the job's future).
  double predict(const SubmitFeatures& f);
  // Predicted total run time of a job that has run `ran` seconds by `now` and is not done: what a
  // driver asks again when a job outlives its prediction (> ran). History up to `now` may be used.
  double predict_given(const SubmitFeatures& f, double now, double ran);

 protected:
  virtual void learn(const SubmitFeatures& f, double run_time, double finish) = 0;
  virtual double guess(const SubmitFeatures& f) = 0;
  // The default doubles what the job has run so far: with nothing known but that it has outlived
  // its prediction, as long again is the median of a scale-free guess.
  virtual double guess_given(const SubmitFeatures& f, double now, double ran) {
    (void)f, (void)now;
    return 2 * ran;
  }

 protected:
  void check_asked_at(double t) const;                                      // the no-future rule
  void check_given(const SubmitFeatures& f, double now, double ran) const;  // and predict_given's arguments

 private:
  double newest_finish_ = -kInf;
};

// Running statistics of finished run times, most specific first: the same queue and gang size,
// the same queue, the same gang size, every job. The first group with `min_samples` finished
// jobs answers with the `quantile` of its `window` most recent run times; with no history at all,
// `prior` seconds. For a job that has outlived its prediction, the same with the run times longer
// than it has run, from the first group with `min_samples` of those; else twice what it has run.
struct HistoryOptions {
  double quantile = 0.5;
  int window = 32;
  int min_samples = 3;
  double prior = 3600;
};

class HistoryPredictor final : public DurationPredictor {
 public:
  explicit HistoryPredictor(HistoryOptions opt = {});
  std::string name() const override { return "history"; }

  // A group's `window` most recent run times, in arrival order (to drop the oldest) and sorted
  // (so that a quantile, or one of the times longer than a job has run, is read, not sorted, at
  // each of the thousands of questions a simulation asks).
  struct Group {
    std::deque<double> recent;
    std::vector<double> sorted;
  };
  // The job's groups, most specific first (queue and gang size, queue, gang size, every job), as
  // they stand: what a model over these statistics (learned/quantile_predictor.h) reads.
  using Groups = std::array<const Group*, 4>;  // the pointers stay valid for the predictor's life
  Groups groups(const SubmitFeatures& f) {
    const auto& g = groups_of(f);
    return {g[0], g[1], g[2], g[3]};
  }
  // predict_given for a job whose groups the caller looked up once (groups(f)): the same answer
  // and checks without the lookup, for a caller asking about every running job at every decision.
  using DurationPredictor::predict_given;
  double predict_given(const Groups& groups, const SubmitFeatures& f, double now, double ran);
  const HistoryOptions& options() const { return opt_; }

 private:
  void learn(const SubmitFeatures& f, double run_time, double finish) override;
  double guess(const SubmitFeatures& f) override;
  double guess_given(const SubmitFeatures& f, double now, double ran) override;
  double given_in(const Groups& groups, double ran) const;
  // A job's groups, most specific first, found once per (queue, gang size).
  const std::array<Group*, 4>& groups_of(const SubmitFeatures& f);
  HistoryOptions opt_;
  std::unordered_map<std::string, Group> groups_;  // the map's nodes never move
  std::unordered_map<std::string, std::array<Group*, 4>> of_key_;
};

// Built from `--set history.KEY=V` (quantile, window, min_samples, prior); unknown keys are errors.
HistoryOptions history_options(const PolicyParams& params);

// The predictors by name: `history` (above) or `quantile` (learned/quantile_predictor.h), each
// with its `--set NAME.KEY=V` parameters; unknown names and keys are errors. In registry.cpp.
std::unique_ptr<DurationPredictor> make_predictor(const std::string& name, const PolicyParams& params = {});
std::vector<std::string> predictor_names();

// Median over jobs of |log(predicted / actual)|: 0 is perfect, log 2 = 0.69 means "within a factor
// of two" for the median job. Pairs with a non-positive value are left out.
double median_abs_log_error(const std::vector<double>& predicted, const std::vector<double>& actual);

}  // namespace ember::sched
