#include "scheduler/predict.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "scheduler/params.h"
#include "scheduler/stats.h"

namespace ember::sched {

void DurationPredictor::observe(const SubmitFeatures& f, double run_time, double finish) {
  EMBER_CHECK(std::isfinite(run_time) && run_time >= 0, "predictor ", name(),
              ": run time of a finished job must be >= 0 s, got ", run_time);
  EMBER_CHECK(finish >= newest_finish_, "predictor ", name(),
              ": finished jobs must come in finish order, got one at t=", finish, " after one at t=", newest_finish_);
  EMBER_CHECK(finish >= f.submit, "predictor ", name(), ": a job finished at t=", finish,
              " before its submission at t=", f.submit);
  newest_finish_ = finish;
  learn(f, run_time, finish);
}

void DurationPredictor::check_asked_at(double t) const {
  EMBER_CHECK(t >= newest_finish_, "predictor ", name(), ": asked at t=", t,
              " after being told of a job that finished at t=", newest_finish_,
              "; the driver is leaking history from the future");
}

double DurationPredictor::predict(const SubmitFeatures& f) {
  check_asked_at(f.submit);
  return std::max(guess(f), 1.0);
}

void DurationPredictor::check_given(const SubmitFeatures& f, double now, double ran) const {
  check_asked_at(now);
  EMBER_CHECK(now >= f.submit && ran >= 0, "predictor ", name(), ": a job submitted at t=", f.submit,
              " cannot have run ", ran, " s by t=", now);
}

double DurationPredictor::predict_given(const SubmitFeatures& f, double now, double ran) {
  check_given(f, now, ran);
  return std::max(guess_given(f, now, ran), ran + 1.0);
}

HistoryPredictor::HistoryPredictor(HistoryOptions opt) : opt_(opt) {
  EMBER_CHECK(opt_.quantile >= 0 && opt_.quantile <= 1, "history predictor: quantile must be in [0, 1], got ",
              opt_.quantile);
  EMBER_CHECK(opt_.window >= 1, "history predictor: window must be >= 1 job, got ", opt_.window);
  EMBER_CHECK(opt_.min_samples >= 1 && opt_.min_samples <= opt_.window,
              "history predictor: min_samples must be in [1, ", opt_.window, "], got ", opt_.min_samples);
  EMBER_CHECK(opt_.prior > 0, "history predictor: prior must be > 0 s, got ", opt_.prior);
}

const std::array<HistoryPredictor::Group*, 4>& HistoryPredictor::groups_of(const SubmitFeatures& f) {
  std::string key = std::to_string(f.gpus);
  key.append(1, '|').append(f.queue);
  auto it = of_key_.find(key);
  if (it != of_key_.end()) return it->second;
  std::array<Group*, 4> g{};
  const std::array<std::string, 4> names = history_groups(f.queue, f.gpus);
  for (size_t i = 0; i < names.size(); ++i) g[i] = &groups_[names[i]];
  return of_key_.emplace(std::move(key), g).first->second;
}

void HistoryPredictor::learn(const SubmitFeatures& f, double run_time, double finish) {
  (void)finish;
  for (Group* g : groups_of(f)) {
    g->recent.push_back(run_time);
    g->sorted.insert(std::upper_bound(g->sorted.begin(), g->sorted.end(), run_time), run_time);
    if (static_cast<int>(g->recent.size()) > opt_.window) {
      g->sorted.erase(std::lower_bound(g->sorted.begin(), g->sorted.end(), g->recent.front()));
      g->recent.pop_front();
    }
  }
}

double HistoryPredictor::guess(const SubmitFeatures& f) {
  for (const Group* g : groups_of(f))
    if (static_cast<int>(g->sorted.size()) >= opt_.min_samples) return sorted_percentile(g->sorted, opt_.quantile);
  return opt_.prior;
}

double HistoryPredictor::predict_given(const Groups& groups, const SubmitFeatures& f, double now, double ran) {
  check_given(f, now, ran);
  return std::max(given_in(groups, ran), ran + 1.0);
}

double HistoryPredictor::guess_given(const SubmitFeatures& f, double now, double ran) {
  (void)now;
  return given_in(groups(f), ran);
}

double HistoryPredictor::given_in(const Groups& groups, double ran) const {
  for (const Group* g : groups) {
    // The run times longer than `ran`: the sorted tail past it.
    const std::span<const double> longer(std::upper_bound(g->sorted.begin(), g->sorted.end(), ran), g->sorted.end());
    if (static_cast<int>(longer.size()) >= opt_.min_samples) return sorted_percentile(longer, opt_.quantile);
  }
  return 2 * ran;
}

HistoryOptions history_options(const PolicyParams& params) {
  ParamReader r("history", params);
  HistoryOptions o;
  o.quantile = r.number("quantile", o.quantile, 0, 1);
  o.window = static_cast<int>(r.number("window", o.window, 1, 1e6));
  o.min_samples = static_cast<int>(r.number("min_samples", o.min_samples, 1, 1e6));
  o.prior = r.number("prior", o.prior, 1e-3, 1e12);
  r.finish();
  return o;
}

double median_abs_log_error(const std::vector<double>& predicted, const std::vector<double>& actual) {
  EMBER_CHECK(predicted.size() == actual.size(), "median_abs_log_error: ", predicted.size(), " predictions for ",
              actual.size(), " jobs");
  std::vector<double> e;
  for (size_t i = 0; i < predicted.size(); ++i)
    if (predicted[i] > 0 && actual[i] > 0) e.push_back(std::abs(std::log(predicted[i] / actual[i])));
  return percentile(std::move(e), 0.5);
}

}  // namespace ember::sched
