// The Gittins index of a job's attained service under an empirical distribution of total service
// (Gittins 1989; Tiresias, NSDI 2019, uses it for GPU jobs with GPU-seconds as service). For a job
// that has received `a` and a quantum `d`, the ratio
//     P(S - a <= d | S > a) / E[min(S - a, d) | S > a]
// is the chance of finishing within the quantum per unit of service spent on it; the index is its
// supremum over d. Serving the job of highest index minimises the mean completion time on one
// server when durations are unknown but their distribution is, which is the scheduler's situation:
// durations unknown, the history of finished jobs known.
#pragma once

#include <span>
#include <vector>

namespace ember::sched {

class ServiceDistribution {
 public:
  ServiceDistribution() = default;
  // Total services of finished jobs (any order; negative values are an ember::Error).
  explicit ServiceDistribution(std::vector<double> samples);
  size_t size() const { return s_.size(); }
  // The Gittins index at attained service `a`, in 1/service units. For a discrete distribution
  // the supremum over quanta is reached at a quantum that ends on a sample, so this takes the
  // best of those: O(samples above a). 0 when no sample lies above `a` (the job has outlived all
  // of history and nothing says when it ends).
  double index(double a) const;
  // The same supremum over quanta that end at the given points only (those above `a`; +inf means
  // "until the job ends"): what a policy that re-ranks at fixed thresholds can act on. Fewer
  // candidate quanta also keep one sample just above `a` from making the index spike.
  // O(ends x log samples).
  double index(double a, std::span<const double> ends) const;

 private:
  std::vector<double> s_;       // sorted
  std::vector<double> prefix_;  // prefix_[i] = s_[0] + ... + s_[i-1]
};

}  // namespace ember::sched
