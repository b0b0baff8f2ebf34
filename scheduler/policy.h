// The one interface every scheduling policy implements, so that the trace simulator and the live
// daemon drive the very same objects. At each scheduling point (a job arrived or finished, or the
// policy's own wake-up time came) the driver hands the policy a SchedState: the current time, the
// cluster's free devices and the waiting and running jobs. The policy answers with a Decision:
// which running jobs to preempt and which waiting jobs to start where. The driver applies the
// preemptions first, then the starts, and rejects (ember::Error) any start that does not fit.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/job.h"

namespace ember::sched {

// Seconds of a job's work one second on a device of `type` (Topology::type_name) does: its speed
// relative to the reference type (scheduler/speeds.h).
using SpeedFn = std::function<double(const JobSpec& job, int type)>;

struct SchedState {
  double now = 0;
  const Cluster* cluster = nullptr;
  std::span<const Job* const> waiting;  // submission order (submit time, then id)
  std::span<const Job* const> running;
  double preempt_cost = 0;  // seconds one preemption is expected to cost the preempted job
  // Per device type speeds on a heterogeneous cluster (nullptr: every device runs at 1).
  const SpeedFn* speed = nullptr;
};

struct Start {
  JobId job = -1;
  Placement placement;
};

struct Decision {
  std::vector<JobId> preempt;  // applied first; a job preempted and started again migrates
  std::vector<Start> start;
  bool empty() const { return preempt.empty() && start.empty(); }
};

// Flags a policy's report carries (the simulator's JSON `clairvoyant` key, the property tests'
// choice of which invariants apply).
struct PolicyTraits {
  bool clairvoyant = false;  // reads durations or estimates
  bool preemptive = false;
  bool work_conserving = false;  // never leaves a device idle while a waiting job could use it
  bool learns = false;           // learns from the jobs that finished (job_finished), not durations
  // Starts jobs strictly in its order: nobody overtakes a job that does not fit (fcfs); what
  // admission's look-ahead walks the same way.
  bool strict_order = false;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;
  virtual PolicyTraits traits() const = 0;
  // May update the policy's own bookkeeping (aging, promotions); the jobs are the driver's.
  virtual Decision decide(const SchedState& s) = 0;
  // The next time, strictly after s.now, at which the policy wants to decide again although no
  // job arrives or finishes (a job crossing a queue threshold, a starving job's promotion).
  virtual double next_wakeup(const SchedState& s) const {
    (void)s;
    return kInf;
  }
  // A job completed its work (not cancelled, not failed), with its final bookkeeping: what a
  // policy that learns from history learns from. Called before forget(j.id).
  virtual void job_finished(const Job& j) { (void)j; }
  // Lets a policy forget a job that has left the system.
  virtual void forget(JobId id) { (void)id; }
  // What the policy did, for reports (e.g. how often a search ran and beat its greedy start).
  virtual std::map<std::string, double> counters() const { return {}; }
};

// Policy parameters: "name.key" -> value strings from the command line (`--set las.promote=8`).
using PolicyParams = std::map<std::string, std::string>;

// The registered policy names in --compare order, and the factory. `learned:FILE` loads a trained
// policy network (scheduler/learned/). Throws ember::Error for an unknown name, an unreadable or
// wrong policy file, or a bad parameter (naming it and what was expected); a parameter addressed
// to this policy that it does not know is an error too.
const std::vector<std::string>& policy_names();
std::unique_ptr<Policy> make_policy(const std::string& name, const PolicyParams& params = {});

}  // namespace ember::sched
