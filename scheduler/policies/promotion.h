// What las and gittins share, both ranking by attained service that changes at edges: the
// starvation guard (a waiting job below the top rank that has waited `factor` times as long as it
// has ever run has its attained service counted afresh from then: it returns to the top; 0 turns
// the guard off), and when a running job reaches an edge.
#pragma once

#include <algorithm>
#include <unordered_map>

#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"

namespace ember::sched {

class Promotions {
 public:
  explicit Promotions(double factor) : factor_(factor) {}
  // Device-seconds attained by `now` since the job's latest promotion.
  double attained(const Job& j, double now) const {
    auto it = base_.find(j.id);
    return j.attained(now) - (it == base_.end() ? 0.0 : it->second);
  }
  // Promotes the waiting jobs that qualify; below(j): whether j ranks below the top.
  template <typename Below>
  void apply(const SchedState& s, const Below& below) {
    if (factor_ <= 0) return;
    for (const Job* j : s.waiting)
      if (below(*j) && s.now - j->queued_since >= factor_ * j->executed_at(s.now) - 1e-9)
        base_[j->id] = j->attained(s.now);
  }
  // The earliest time a waiting job below the top qualifies (+inf: none).
  template <typename Below>
  double next(const SchedState& s, const Below& below) const {
    double t = kInf;
    if (factor_ <= 0) return t;
    for (const Job* j : s.waiting)
      if (below(*j)) t = std::min(t, std::max(s.now, j->queued_since + factor_ * j->executed_at(s.now)));
    return t;
  }
  void forget(JobId id) { base_.erase(id); }

 private:
  double factor_;
  std::unordered_map<JobId, double> base_;  // attained service at the latest promotion
};

// Seconds until running job j, at `from` device-seconds attained, reaches `to`: it attains its
// devices x its rate per second.
inline double seconds_to_attain(const Job& j, double from, double to) {
  return (to - from) / (j.spec.gpus * j.rate);
}

// RankingPolicy::ahead_until for a rank that changes only as the running job r, at `attained`,
// crosses an edge (next(e): the first edge above e, +inf past the last): the first edge before
// `end` at which r ranks behind w, probed a millisecond past its time so that the attained
// service lands beyond it; else `end`.
template <typename Next, typename Rank>
double first_edge_behind(const Job& r, double attained, const Ranked& w, double now, double end, const Next& next,
                         const Rank& rank) {
  for (double e = next(attained); e < kInf; e = next(e)) {
    const double t = now + seconds_to_attain(r, attained, e) + 1e-3;
    if (t >= end) break;
    if (w < rank(r, t)) return t;
  }
  return end;
}

}  // namespace ember::sched
