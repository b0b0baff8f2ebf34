#include "scheduler/apply_decision.h"

#include <unordered_set>

#include "core/error.h"

namespace ember::sched {

void apply_decision(const Decision& d, const std::string& policy, DecisionTarget& to) {
  std::unordered_set<JobId> preempted, started;
  for (JobId id : d.preempt)
    EMBER_CHECK(to.running(id) && preempted.insert(id).second, "policy '", policy, "' preempted job ", id,
                ", which is not running");
  for (const Start& st : d.start)
    EMBER_CHECK((to.waiting(st.job) || preempted.count(st.job)) && started.insert(st.job).second, "policy '", policy,
                "' started job ", st.job, ", which is not waiting");
  for (JobId id : d.preempt) to.preempt(id);
  // Starts make no job stop: whether one is stopping is known once, not per start (the daemon
  // counts its jobs to answer).
  const bool stopping = to.any_stopping();
  for (const Start& st : d.start) {
    if (to.stopping(st.job)) continue;
    const JobSpec& s = to.job(st.job).spec;
    if (stopping && !placement_problem(to.cluster().free(), st.placement, s.gpus, s.mem_per_gpu).empty()) continue;
    if (!to.may_start(st.job)) continue;
    to.start(st.job, st.placement);
  }
}

}  // namespace ember::sched
