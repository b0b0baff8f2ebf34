// Shortest remaining service first: the oracle yardstick. Ranks every job, running or waiting, by
// the device-seconds it still needs according to its true duration (the simulator knows it; a
// live daemon only has estimates), and preempts a running job whenever better-ranked waiting jobs
// need its devices. Remaining service only shrinks while a job runs and grows when it is
// preempted (the preemption cost is added to its work), so two jobs never take turns forever.
// With `estimates` = 1 it ranks by the submitter's estimate instead (the trace's estimate column),
// as a live daemon must: fed estimates of a chosen error, it measures how good duration
// knowledge must be for the oracle's average JCT (bench/sched_knowledge). A job that
// outlives its estimate counts as about to finish (Job::estimated_remaining).
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Srsf final : public RankingPolicy {
 public:
  Srsf(double defrag, bool estimates) : defrag_(defrag), estimates_(estimates) {}
  std::string name() const override { return "srsf"; }
  PolicyTraits traits() const override { return {.clairvoyant = true, .preemptive = true, .work_conserving = true}; }
  Ranked rank(const Job& j, double now) override {
    const double remaining = estimates_ ? j.estimated_remaining(now) : j.true_remaining(now);
    return {remaining * j.spec.gpus, j.status == JobStatus::kWaiting ? 1.0 : 0.0, j.spec.submit, &j};
  }
  Decision decide(const SchedState& s) override {
    return list_schedule_preemptive(
        s, [&](const Job& j) { return rank(j, s.now); }, ranked_, defrag_);
  }

 private:
  std::vector<Ranked> ranked_;
  double defrag_ = 0;
  bool estimates_ = false;
};

}  // namespace

std::unique_ptr<Policy> make_srsf(const PolicyParams& p) {
  ParamReader r("srsf", p);
  const double defrag = r.number("defrag", 0, 0, 16);
  const bool estimates = r.number("estimates", 0, 0, 1) != 0;
  r.finish();
  return std::make_unique<Srsf>(defrag, estimates);
}

}  // namespace ember::sched
