// Finish-time fairness between teams, greedily (after Themis, Mahajan et al., NSDI 2020, whose
// auction this replaces with a ranking): the team that sharing is hurting most goes first. A
// team's rho is estimated online from its active jobs as (time they have spent in the system +
// a minute) / (time they have run + a minute): about 1 for a team whose jobs run as soon as they
// arrive, large for one whose jobs wait. Teams are ranked by that estimate in steps of 25% (so
// that small changes do not reshuffle the cluster; a running job counts one step better, so that
// only a team two steps more hurt preempts it), and inside a team jobs go by least attained
// service in LAS's queues (`themis.thresholds`, device-seconds), running jobs ahead of waiting ones
// among equals. Preemptive, knows no durations; a ranking policy, so it also runs inside team
// quotas (`themis+quota`).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/error.h"
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Themis final : public RankingPolicy {
 public:
  Themis(std::vector<double> thresholds, double defrag) : thresholds_(std::move(thresholds)), defrag_(defrag) {}
  std::string name() const override { return "themis"; }
  PolicyTraits traits() const override { return {.clairvoyant = false, .preemptive = true, .work_conserving = true}; }

  void prepare(const SchedState& s) override {
    in_system_.clear();
    ran_.clear();
    auto add = [&](const Job& j) {
      in_system_[j.spec.queue] += s.now - j.spec.submit;
      ran_[j.spec.queue] += j.executed_at(s.now);
    };
    for (const Job* j : s.waiting) add(*j);
    for (const Job* j : s.running) add(*j);
  }

  Ranked rank(const Job& j, double now) override {
    (void)now;
    const double rho = (in_system_[j.spec.queue] + 60) / (ran_[j.spec.queue] + 60);
    const bool waiting = j.status == JobStatus::kWaiting;
    // A running job keeps its devices against a waiting one unless the waiter's team is two steps
    // (56%) more hurt: the estimates move with every event, and equals must not take turns.
    const double step = -std::floor(std::log(std::max(rho, 1.0)) / std::log(1.25)) - (waiting ? 0 : 1);
    return {step, static_cast<double>(queue_of(j, now)), (waiting ? 1e15 : 0) + j.spec.submit, &j};
  }

  Decision decide(const SchedState& s) override {
    if (s.waiting.empty()) return {};
    prepare(s);
    return list_schedule_preemptive(
        s, [&](const Job& j) { return rank(j, s.now); }, ranked_, defrag_);
  }

  // When a running job crosses into the next attained-service queue (its rank among its team's
  // jobs changes then, with nothing arriving or ending).
  double next_wakeup(const SchedState& s) const override {
    double t = kInf;
    if (s.waiting.empty()) return t;
    for (const Job* j : s.running) {
      const double a = j->attained(s.now);
      auto it = std::upper_bound(thresholds_.begin(), thresholds_.end(), a);
      if (it != thresholds_.end()) t = std::min(t, s.now + (*it - a) / (j->spec.gpus * j->rate));
    }
    return t;
  }

 private:
  int queue_of(const Job& j, double now) const {
    return static_cast<int>(std::upper_bound(thresholds_.begin(), thresholds_.end(), j.attained(now)) -
                            thresholds_.begin());
  }

  std::vector<double> thresholds_;
  double defrag_;
  std::unordered_map<std::string, double> in_system_, ran_;
  std::vector<Ranked> ranked_;
};

}  // namespace

std::unique_ptr<Policy> make_themis(const PolicyParams& p) {
  ParamReader r("themis", p);
  std::vector<double> th = r.numbers("thresholds", {900.0, 9000.0, 90000.0}, 0.0, 1e15);
  // Defragmenting migrations on by default: the teams that sharing hurts most are often those of
  // whole-node gangs, which a fragmented cluster keeps waiting.
  const double defrag = r.number("defrag", 1, 0, 16);
  r.finish();
  for (size_t i = 1; i < th.size(); ++i)
    EMBER_CHECK(th[i] > th[i - 1], "--set themis.thresholds: expected increasing device-seconds, got ", th[i - 1],
                " then ", th[i]);
  return std::make_unique<Themis>(std::move(th), defrag);
}

}  // namespace ember::sched
