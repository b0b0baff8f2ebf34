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
  // Until when running job `r`, ranked ahead of the waiting rank `w` at `now`, stays ahead of it
  // as it runs on: the first time before `end` at which it would rank behind `w` (its rank falls
  // as it attains service under LAS and Gittins), else `end` (the default: a rank that only
  // improves as the job runs, as SRSF's). Admission's look-ahead hands r's devices to w then.
  virtual double ahead_until(const Job& r, const Ranked& w, double now, double end) {
    (void)r, (void)w, (void)now;
    return end;
  }
};

}  // namespace ember::sched
