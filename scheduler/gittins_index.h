// The Gittins index of a job's attained service under an empirical distribution of total service
// (Gittins 1989; Tiresias, NSDI 2019, uses it for GPU jobs with GPU-seconds as service). For a job
// that has received `a` and a quantum `d`, the ratio
//     P(S - a <= d | S > a) / E[min(S - a, d) | S > a]
// is the chance of finishing within the quantum per unit of service spent on it; the index is its
// supremum over d. Serving the job of highest index minimises the mean completion time on one
// server when durations are unknown but their distribution is, which is the scheduler's situation:
// durations unknown, the history of finished jobs known.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/job.h"

namespace ember::sched {

class ServiceDistribution {
 public:
  // Total services of finished jobs (any order; negative values are an ember::Error).
  explicit ServiceDistribution(std::vector<double> samples);
  // How many samples lie above `a`.
  size_t above(double a) const;
  // The Gittins index at attained service `a`, in 1/service units. For a discrete distribution
  // the supremum over quanta is reached at a quantum that ends on a sample, so this takes the
  // best of those: O(samples x log samples). 0 when no sample lies above `a` (the job has
  // outlived all of history and nothing says when it ends).
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

struct GittinsHistoryOptions {
  double base = 60, ratio = 2;  // bin edges in device-seconds: 0, base, base * ratio, ...
  int min_history = 16;         // finished jobs before a group's table exists
  double refresh = 0.05;        // rebuild a group's table after this fraction of new finishes
  bool by_group = true;         // false: one distribution for every job
};

// Service distributions of the jobs that finished, per group, most specific first: the same queue
// and gang size, the same queue, the same gang size, every job (the jobs of a virtual cluster
// repeat, so a group's distribution is much narrower than the whole), each with a table of the
// Gittins index at every bin edge, over quanta that end at later edges or at the job's end (as in
// Tiresias' discretised form: one finished job just above an edge cannot make its index spike).
// What the gittins policy ranks by, and one of the learned policy's features.
class GittinsHistory {
 public:
  explicit GittinsHistory(GittinsHistoryOptions o = {});
  void add(const Job& j);  // a finished job: its service is (executed - overhead) x devices
  void forget(JobId id);
  size_t bin(double attained) const;        // the bin holding `attained` device-seconds
  double next_edge(double attained) const;  // the first edge above `attained` (+inf past the last)
  // The index of job j at attained service `attained` (read at its bin's lower edge), from the
  // most specific group that still holds min_history jobs that ran longer: a job that outlived
  // its group's history falls back to a coarser group rather than to 0 behind everyone; the whole
  // history has the last word. Empty until min_history jobs have finished.
  std::optional<double> index(const Job& j, double attained);
  long rebuilds() const { return rebuilds_; }
  long finished() const { return finished_; }

 private:
  static constexpr size_t kGroups = 4;
  struct Group {
    std::vector<double> samples;
    std::vector<double> index;  // at each edge; empty until min_history of them finished
    std::vector<int> beyond;    // at each edge, how many samples lie above it
    double built = 0;           // samples when the table was built
    double added = 0;           // finishes since
  };
  void rebuild(Group& g);
  const std::array<Group*, kGroups>& groups_of(const Job& j);

  GittinsHistoryOptions o_;
  std::vector<double> edges_;  // bin lower edges, edges_[0] = 0
  std::vector<double> ends_;   // the quanta's ends: every edge after the first, then +inf
  std::unordered_map<std::string, Group> groups_;
  std::unordered_map<JobId, std::array<Group*, kGroups>> of_job_;  // the map's nodes never move
  long rebuilds_ = 0, finished_ = 0;
};

}  // namespace ember::sched
