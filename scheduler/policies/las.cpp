// Discretised least attained service (Tiresias' 2D-LAS): a job's attained service is the
// device-seconds it has consumed (devices x seconds run). Queue q holds the jobs whose attained
// service lies between thresholds q-1 and q; a better queue always goes first, and within a
// queue jobs keep submission order, running ones ahead of waiting ones so that equals never
// preempt each other. New jobs enter the top queue, so short jobs overtake long ones without any
// knowledge of durations, and long jobs sink as they run. Starvation guard: a job that has waited
// `promote` times as long as it has ever run is moved back to the top queue (its attained service
// counts again from there). Preemptive: a job that sinks below a waiting one gives way.
#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/policies/promotion.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Las final : public RankingPolicy {
 public:
  Las(std::vector<double> thresholds, double promote, double defrag)
      : thresholds_(std::move(thresholds)), promotions_(promote), defrag_(defrag) {}
  std::string name() const override { return "las"; }
  PolicyTraits traits() const override { return {.clairvoyant = false, .preemptive = true, .work_conserving = true}; }

  void prepare(const SchedState& s) override {
    promotions_.apply(s, [&](const Job& j) { return queue_of(j, s.now) > 0; });
  }
  Ranked rank(const Job& j, double now) override {
    return {static_cast<double>(queue_of(j, now)), j.status == JobStatus::kWaiting ? 1.0 : 0.0, j.spec.submit, &j};
  }
  Decision decide(const SchedState& s) override {
    if (s.waiting.empty()) return {};
    prepare(s);
    return list_schedule_preemptive(
        s, [&](const Job& j) { return rank(j, s.now); }, ranked_, defrag_);
  }

  // A running job's queue rises at each threshold it crosses: the first at which it ranks behind w.
  double ahead_until(const Job& r, const Ranked& w, double now, double end) override {
    return first_edge_behind(
        r, promotions_.attained(r, now), w, now, end, [&](double e) { return next_threshold(e); },
        [&](const Job& j, double t) { return rank(j, t); });
  }

  double next_wakeup(const SchedState& s) const override {
    double t = kInf;
    if (s.waiting.empty()) return t;  // demotions matter only when someone waits
    for (const Job* j : s.running) {
      const double a = promotions_.attained(*j, s.now), e = next_threshold(a);
      if (e < kInf) t = std::min(t, s.now + seconds_to_attain(*j, a, e));
    }
    return std::min(t, promotions_.next(s, [&](const Job& j) { return queue_of(j, s.now) > 0; }));
  }

  void forget(JobId id) override { promotions_.forget(id); }

 private:
  // The first threshold above `a` device-seconds (+inf past the last).
  double next_threshold(double a) const {
    auto it = std::upper_bound(thresholds_.begin(), thresholds_.end(), a);
    return it == thresholds_.end() ? kInf : *it;
  }
  int queue_of(const Job& j, double now) const {
    double a = promotions_.attained(j, now);
    return static_cast<int>(std::upper_bound(thresholds_.begin(), thresholds_.end(), a) - thresholds_.begin());
  }

  std::vector<double> thresholds_;
  Promotions promotions_;
  std::vector<Ranked> ranked_;
  double defrag_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_las(const PolicyParams& p) {
  ParamReader r("las", p);
  std::vector<double> th = r.numbers("thresholds", {900.0, 9000.0, 90000.0}, 0.0, 1e15);
  double promote = r.number("promote", 8.0, 0.0, 1e9);
  double defrag = r.number("defrag", 0, 0, 16);
  r.finish();
  for (size_t i = 1; i < th.size(); ++i)
    EMBER_CHECK(th[i] > th[i - 1], "--set las.thresholds: expected increasing device-seconds, got ", th[i - 1],
                " then ", th[i]);
  return std::make_unique<Las>(std::move(th), promote, defrag);
}

}  // namespace ember::sched
