// Greedy best fit: the search policies' starting point on its own. Ranks running and waiting
// jobs by completion rate per device (1 / (estimated remaining seconds x devices); a running job
// also counts what preempting it would cost) and list-schedules them with best-fit placement,
// preempting only when a better-ranked job needs the devices. See scheduler/search.h.
#include "scheduler/params.h"
#include "scheduler/policies/policies.h"
#include "scheduler/search.h"

namespace ember::sched {
namespace {

class Greedy final : public SearchPolicy {
 public:
  explicit Greedy(Options o) : SearchPolicy(o) {}
  std::string name() const override { return "greedy"; }
  bool searches() const override { return false; }

 protected:
  std::optional<Decision> improve(const SearchProblem&, const Decision&, double) override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<Policy> make_greedy(const PolicyParams& p) {
  ParamReader r("greedy", p);
  SearchPolicy::Options o;
  o.defrag = r.number("defrag", o.defrag, 0, 16);
  r.finish();
  return std::make_unique<Greedy>(o);
}

}  // namespace ember::sched
