// Gittins-index scheduling without durations (Tiresias-G): every job, running or waiting, is
// ranked by the Gittins index of its attained service (device-seconds: devices x seconds run)
// under the distribution of total service of the jobs that finished so far, learned online from
// job_finished, per group (scheduler/gittins_index.h: queue and gang size, queue, gang size, all). A
// high index means "likely to finish soon for the service it will still take": new jobs when
// most jobs are short, and a job just short of a cluster of finishes in its group's history.
// Attained service is discretised into geometric bins (`base` device-seconds, growing by `ratio`)
// and the index is read at a bin's lower edge, so a job's rank changes only when it crosses an
// edge: those crossings are the policy's wake-ups. Until `min_history` jobs have finished there is
// no distribution yet and jobs are ranked by bin alone (least attained service first); a table is
// rebuilt after every `refresh` fraction of new finishes in its group. Starvation guard as in LAS:
// a job that has waited `promote` times as long as it has ever run counts its attained service
// afresh from then. Preemptive; within a rank running jobs go first, so equals never preempt
// each other.
#include "scheduler/gittins_index.h"

#include <algorithm>

#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/policies/promotion.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Gittins final : public RankingPolicy {
 public:
  Gittins(GittinsHistoryOptions h, double promote, double defrag)
      : history_(h), promotions_(promote), defrag_(defrag) {}
  std::string name() const override { return "gittins"; }
  PolicyTraits traits() const override {
    return {.clairvoyant = false, .preemptive = true, .work_conserving = true, .learns = true};
  }

  void prepare(const SchedState& s) override {
    promotions_.apply(s, [&](const Job& j) { return below_top(j, s.now); });
  }
  Ranked rank(const Job& j, double now) override {
    return {key(j, now), j.status == JobStatus::kWaiting ? 1.0 : 0.0, j.spec.submit, &j};
  }
  Decision decide(const SchedState& s) override {
    if (s.waiting.empty()) return {};
    prepare(s);
    return list_schedule_preemptive(
        s, [&](const Job& j) { return rank(j, s.now); }, ranked_, defrag_);
  }
  // Its rank changes only as it crosses a bin edge: the first edge at which it ranks behind w.
  double ahead_until(const Job& r, const Ranked& w, double now, double end) override {
    return first_edge_behind(
        r, promotions_.attained(r, now), w, now, end, [&](double e) { return history_.next_edge(e); },
        [&](const Job& j, double t) { return rank(j, t); });
  }

  double next_wakeup(const SchedState& s) const override {
    double t = kInf;
    if (s.waiting.empty()) return t;  // a rank change matters only when someone waits
    for (const Job* j : s.running) {
      const double a = promotions_.attained(*j, s.now), e = history_.next_edge(a);
      if (e < kInf) t = std::min(t, s.now + seconds_to_attain(*j, a, e));
    }
    return std::min(t, promotions_.next(s, [&](const Job& j) { return below_top(j, s.now); }));
  }

  void job_finished(const Job& j) override { history_.add(j); }

  void forget(JobId id) override {
    promotions_.forget(id);
    history_.forget(id);
  }

  std::map<std::string, double> counters() const override {
    return {{"table_rebuilds", static_cast<double>(history_.rebuilds())},
            {"history_jobs", static_cast<double>(history_.finished())}};
  }

 private:
  bool below_top(const Job& j, double now) const { return history_.bin(promotions_.attained(j, now)) > 0; }
  double key(const Job& j, double now) {
    const double a = promotions_.attained(j, now);
    std::optional<double> index = history_.index(j, a);
    return index ? -*index : static_cast<double>(history_.bin(a));
  }

  GittinsHistory history_;
  Promotions promotions_;
  std::vector<Ranked> ranked_;
  double defrag_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_gittins(const PolicyParams& p) {
  ParamReader r("gittins", p);
  GittinsHistoryOptions h;
  h.base = r.number("base", h.base, 1e-3, 1e12);
  h.ratio = r.number("ratio", h.ratio, 1.01, 1e3);
  h.min_history = static_cast<int>(r.number("min_history", h.min_history, 1, 1e9));
  h.refresh = r.number("refresh", h.refresh, 0, 10);
  h.by_group = r.number("by_group", 1, 0, 1) != 0;
  double promote = r.number("promote", 8, 0, 1e9);
  double defrag = r.number("defrag", 0, 0, 16);
  r.finish();
  return std::make_unique<Gittins>(h, promote, defrag);
}

}  // namespace ember::sched
