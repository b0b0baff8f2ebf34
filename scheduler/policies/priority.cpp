// Priority with aging: a job's effective priority is its own plus `aging` points per hour it has
// waited since submission, so a low-priority job is eventually served. Not preemptive; free
// devices go to the highest effective priority that fits (best fit), older first among equals.
// Aging is linear in the wait, so the order changes only between decisions, never needing a
// wake-up of its own.
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Priority final : public RankingPolicy {
 public:
  explicit Priority(double aging) : aging_per_s_(aging / 3600.0) {}
  std::string name() const override { return "priority"; }
  PolicyTraits traits() const override { return {.clairvoyant = false, .preemptive = false, .work_conserving = true}; }
  Ranked rank(const Job& j, double now) override {
    return {-(j.spec.priority + aging_per_s_ * (now - j.spec.submit)), j.spec.submit, 0, &j};
  }
  Decision decide(const SchedState& s) override {
    if (s.cluster->free().total_free() == 0) return {};
    ranked_.clear();
    for (const Job* j : s.waiting) ranked_.push_back(rank(*j, s.now));
    return list_schedule(s, ranked_);
  }

 private:
  double aging_per_s_;
  std::vector<Ranked> ranked_;
};

}  // namespace

std::unique_ptr<Policy> make_priority(const PolicyParams& p) {
  ParamReader r("priority", p);
  double aging = r.number("aging", 1.0, 0.0, 1e9);
  r.finish();
  return std::make_unique<Priority>(aging);
}

}  // namespace ember::sched
