// Policies whose every decision is a list schedule of their own job order (fcfs, sjf, priority,
// las, gittins, srsf): the order is exposed, so that a wrapper can schedule with it under keys of
// its own. The team level (scheduler/teams.h) runs such a policy inside each team by putting the
// jobs a team's guaranteed share covers ahead of the jobs that borrow idle devices.
#pragma once

#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"

namespace ember::sched {

class RankingPolicy : public Policy {
 public:
  // Bookkeeping a decision does before it ranks (LAS's and Gittins' promotion of starving jobs).
  virtual void prepare(const SchedState& s) { (void)s; }
  // The job's place in the policy's order at `now`, smaller first (k0 left 0). A non-preemptive
  // policy is asked about waiting jobs only.
  virtual Ranked rank(const Job& j, double now) = 0;
};

}  // namespace ember::sched
