// Shortest job first by the submitter's estimate, without preemption: whenever devices free up,
// the waiting jobs with the smallest estimates that fit start (best fit). Jobs without an
// estimate come last, in submission order.
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"

namespace ember::sched {
namespace {

class Sjf final : public RankingPolicy {
 public:
  std::string name() const override { return "sjf"; }
  PolicyTraits traits() const override { return {.clairvoyant = true, .preemptive = false, .work_conserving = true}; }
  Ranked rank(const Job& j, double) override {
    return {j.spec.estimate < 0 ? kInf : j.spec.estimate, j.spec.submit, 0, &j};
  }
  Decision decide(const SchedState& s) override {
    if (s.cluster->free().total_free() == 0) return {};
    ranked_.clear();
    for (const Job* j : s.waiting) ranked_.push_back(rank(*j, s.now));
    return list_schedule(s, ranked_);
  }

 private:
  std::vector<Ranked> ranked_;
};

}  // namespace

std::unique_ptr<Policy> make_sjf(const PolicyParams& p) {
  ParamReader("sjf", p).finish();
  return std::make_unique<Sjf>();
}

}  // namespace ember::sched
