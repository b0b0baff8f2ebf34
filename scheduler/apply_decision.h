// The rules for applying a policy's decision, written once for both drivers: the trace simulator
// (scheduler/sim/) and the daemon (scheduler/daemon/). Each driver says how a preemption and a
// start are carried out on its jobs (a DecisionTarget); apply_decision() says which of them are
// carried out, and in what order. What the simulator measures is then what the daemon runs.
#pragma once

#include <string>

#include "scheduler/cluster.h"
#include "scheduler/job.h"
#include "scheduler/policy.h"

namespace ember::sched {

// A driver's jobs and cluster, as apply_decision() needs them. Ids are the policy's: one the
// driver does not know is neither running nor waiting.
class DecisionTarget {
 public:
  virtual ~DecisionTarget() = default;
  virtual bool running(JobId id) const = 0;
  virtual bool waiting(JobId id) const = 0;
  // A preempted job that still holds its devices while it checkpoints and exits.
  virtual bool stopping(JobId id) const = 0;
  // Whether any job is stopping (its devices come free at its exit).
  virtual bool any_stopping() const = 0;
  virtual const Job& job(JobId id) const = 0;
  virtual const Cluster& cluster() const = 0;
  // A start the driver holds back for reasons of its own (the daemon: an owner's device limit).
  virtual bool may_start(JobId id) {
    (void)id;
    return true;
  }
  virtual void preempt(JobId id) = 0;
  // Starts the job on the placement; a placement that does not fit throws ember::Error.
  virtual void start(JobId id, const Placement& p) = 0;
};

// Applies `d`, the decision of the policy named `policy`, to `to`. The whole decision is checked
// before any of it is applied, so that a wrong entry never leaves it half done: every preempted
// job must be running and every started one waiting or preempted by this decision, each named
// once (ember::Error naming the policy and the job otherwise). Then the preemptions, then the
// starts, in the decision's order, except that
//   - a job preempted and started again (a migration) starts only once it has stopped: while it
//     still holds its devices, its exit brings the next decision, which places it;
//   - a start onto devices a stopping job holds waits for the next decision after that job's exit
//     (with no job stopping, a placement that does not fit is the policy's error: start throws);
//   - a start the driver's may_start() refuses waits.
void apply_decision(const Decision& d, const std::string& policy, DecisionTarget& to);

}  // namespace ember::sched
