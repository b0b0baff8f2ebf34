// Shortest remaining service first: the oracle yardstick. Ranks every job, running or waiting, by
// the device-seconds it still needs according to its true duration (the simulator knows it; a
// live daemon only has estimates), and preempts a running job whenever better-ranked waiting jobs
// need its devices. Remaining service only shrinks while a job runs and grows when it is
// preempted (the preemption cost is added to its work), so two jobs never take turns forever.
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Srsf final : public RankingPolicy {
 public:
  explicit Srsf(double defrag) : defrag_(defrag) {}
  std::string name() const override { return "srsf"; }
  PolicyTraits traits() const override { return {.clairvoyant = true, .preemptive = true, .work_conserving = true}; }
  Ranked rank(const Job& j, double now) override {
    return {j.true_remaining(now) * j.spec.gpus, j.status == JobStatus::kWaiting ? 1.0 : 0.0, j.spec.submit, &j};
  }
  Decision decide(const SchedState& s) override {
    return list_schedule_preemptive(
        s, [&](const Job& j) { return rank(j, s.now); }, ranked_, defrag_);
  }

 private:
  std::vector<Ranked> ranked_;
  double defrag_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_srsf(const PolicyParams& p) {
  ParamReader r("srsf", p);
  const double defrag = r.number("defrag", 0, 0, 16);
  r.finish();
  return std::make_unique<Srsf>(defrag);
}

}  // namespace ember::sched
