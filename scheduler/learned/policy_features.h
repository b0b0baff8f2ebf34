// What the learned policy sees of a job at a decision: only what a real scheduler knows (nothing
// of durations). Per job: attained service, gang size, time waited, whether it runs, how often it
// was preempted, the history predictor's total and remaining run time for it, the Gittins index
// of its attained service under its group's history (scheduler/gittins_index.h); and two numbers of the
// whole cluster: the fraction of devices free and how many jobs wait. Each is squashed to about
// [0, 2] (log1p(x) / 10 and the like) so that one network serves any trace's scale.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "scheduler/gittins_index.h"
#include "scheduler/policy.h"
#include "scheduler/predict.h"

namespace ember::sched::learned {

inline constexpr int kFeatures = 10;
inline constexpr int kGittinsFeature = 6;  // log1p(1 / index) / 10: small when likely to finish soon

class PolicyFeatures {
 public:
  PolicyFeatures();
  // A job finished (the driver's job_finished): both histories learn from it.
  void observe(const Job& j, double now);
  void forget(JobId id) {
    gittins_.forget(id);
    still_.erase(id);
  }
  // kFeatures floats per job of `jobs`, appended to `out` in that order.
  void rows(const SchedState& s, std::span<const Job* const> jobs, std::vector<float>& out);
  // The next time a job's Gittins feature changes (a running job crossing a bin edge).
  double next_change(const SchedState& s) const;
  long finished() const { return gittins_.finished(); }  // jobs observed

 private:
  // Per job: its history groups, looked up once; and while it waits, the features that stay as
  // they are until the next finish is told (its attained service and preemptions do not move
  // while it waits, and the histories move only at finishes), computed once per wait, not once
  // per decision.
  struct Still {
    HistoryPredictor::Groups groups{};
    uint64_t version = 0;  // observes_ + 1 when `row` was computed (0: never)
    double attained = 0;
    std::array<float, kFeatures> row{};  // the waiting time, free and waiting slots are filled per decision
  };
  GittinsHistory gittins_;
  HistoryPredictor predictor_;
  double newest_ = 0;  // the latest time told, so that a finish is never put before a decision
  uint64_t observes_ = 0;
  std::unordered_map<JobId, Still> still_;
};

}  // namespace ember::sched::learned
