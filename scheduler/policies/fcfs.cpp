// First come, first served, strictly: the oldest waiting job starts as soon as it fits and nobody
// overtakes it, so one wide job at the head idles devices that narrower jobs behind it could use.
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Fcfs final : public RankingPolicy {
 public:
  std::string name() const override { return "fcfs"; }
  PolicyTraits traits() const override {
    return {.clairvoyant = false, .preemptive = false, .work_conserving = false, .strict_order = true};
  }
  // Submission order; the strict walk below uses the waiting list, which is already in it.
  Ranked rank(const Job& j, double) override { return {j.spec.submit, 0, 0, &j}; }
  Decision decide(const SchedState& s) override { return list_schedule_sorted(s, s.waiting, {.strict = true}); }
};

}  // namespace

std::unique_ptr<Policy> make_fcfs(const PolicyParams& p) {
  ParamReader("fcfs", p).finish();
  return std::make_unique<Fcfs>();
}

}  // namespace ember::sched
