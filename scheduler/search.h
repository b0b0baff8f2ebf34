// The greedy and search policies (greedy best fit, integer program, simulated annealing, genetic
// algorithm) share one objective and one decision space, so that "never worse than greedy" means
// something exact.
//
// Decision space: which jobs hold devices after this decision (running ones may be preempted) and
// where the started ones go. Objective (larger is better): the sum over jobs that run of
// v = 1 / (estimated remaining seconds), the rate at which the running set completes jobs, minus,
// for each preempted job, v + pen with pen = v * S / (r + S): the completion rate its lost S
// seconds cost it (S the preemption cost). Packing the most completion rate into the devices is
// what shortest-remaining-service-first does greedily; the search policies do it better where
// gangs and nodes make greedy packing fall short.
//
// Greedy answer: a preemptive list schedule in order of value per device (best fit placement).
// It is optimal whenever its chosen set fills the cluster in that order with everything placed;
// only otherwise does a search policy search, over the order of the contested jobs (those around
// the point where the devices run out) and the nodes of every job near the top, decoding each
// candidate with the same list schedule. It returns the greedy answer unless it found a strictly
// better one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"

namespace ember::sched {

struct SearchObjective {
  double preempt_cost = 0;
  double now = 0;  // the decision's time: what running jobs' remaining work is measured at
  // Look-ahead (seconds; 0: none). With a horizon, a decision is scored by projecting what follows
  // it (SearchProblem::projected_cost) instead of by the completion rate it leaves running.
  double horizon = 0;
  double value(const Job& j) const;
  double penalty(const Job& j) const;
  // With a horizon: the seconds of work a job has left in a look-ahead (its estimate, capped at
  // twice the horizon), the preemption cost added for a job preempted or migrated first.
  double projected_remaining(const Job& j, bool preempted) const;
  // Change in the objective that `d` makes relative to leaving everything as it is.
  double score(const SchedState& s, const Decision& d) const;
};

// One decision's search space.
struct SearchProblem {
  const SchedState* state = nullptr;
  SearchObjective objective;
  std::vector<const Job*> order;  // greedy order: every running and waiting job
  size_t fixed = 0;               // order[0, fixed) keeps its rank
  size_t window_end = 0;          // order[fixed, window_end) may be reordered
  double defrag = 0;              // ListOptions::defrag for every candidate
  // A candidate: a permutation of the window (indices into `order`) and a preferred node for
  // each job in order[0, window_end) (-1: best fit).
  struct Candidate {
    std::vector<int> perm;
    std::vector<int> node;
    int hold = -1;  // an index into `hold_options`: nodes whose free devices wait for `hold_for` (-1: none)
  };
  Candidate greedy() const;
  Decision decode(const Candidate& c, ListStats* stats = nullptr) const;
  // Larger is better: the completion-rate change, or minus the projected cost with a horizon.
  double score(const Candidate& c) const;
  double score(const Decision& d) const;
  // Apply `d`, then run the cluster forward on the estimates with no new arrivals, starting
  // waiting jobs by best fit in order of remaining device-seconds (shortest first) as devices
  // free, without preempting: the sum over the jobs in the system of min(projected completion,
  // horizon), seconds from now. A migrated or preempted job's remaining work grows by the
  // preemption cost. Only the `kProjectedWaiting` best waiting jobs are followed (the rest count
  // the horizon), which bounds a projection's cost on a long queue.
  // `hold`: an index into `hold_options`, whose nodes keep their free devices, and those their jobs
  // free, for `hold_for` alone until it fits there (-1: no reservation).
  double projected_cost(const Decision& d, int hold = -1) const;
  // With a look-ahead: the best-ranked waiting gang that greedy passed over, and the sets of
  // nodes (each as many as the gang must span at least) where a candidate may hold free devices
  // for it until it fits (a reservation; the projection keeps it, so the search takes one only
  // when waiting pays).
  const Job* hold_for = nullptr;
  std::vector<std::vector<int>> hold_options;
  // The devices that option `hold` holds now: each of its nodes' free devices.
  Placement held_now(int hold) const;
  static constexpr size_t kProjectedWaiting = 64;
  // A neighbour: swaps two window jobs or re-homes a job of the top on another node.
  void mutate(Candidate& c, std::mt19937_64& rng) const;
  std::vector<int> movable;  // positions in [0, window_end) of waiting jobs that fit on one node
  // The job of `order` with this id (the map is built on first use).
  const Job& job(JobId id) const;
  mutable std::unordered_map<JobId, const Job*> by_id;
  mutable std::vector<const Job*> scratch_order;  // decode's buffers, reused
  mutable std::vector<int> scratch_pref;
};

class SearchPolicy : public Policy {
 public:
  struct Options {
    double margin = 32;   // devices on each side of the capacity boundary whose jobs are contested
    int window = 48;      // at most this many contested jobs
    bool always = false;  // search even when greedy is provably optimal (benchmarks, tests)
    // A search that did not beat greedy is not repeated while greedy passes over the same jobs
    // with the same devices left, until this many seconds have passed.
    double repeat_after = 600;
    // At most one search per this many seconds (a scheduling round); greedy in between. Searching
    // at every decision costs 20-80x the simulation time for a JCT change within +-0.5% on the
    // Philly week (bench/history/2026-11.md, issue 7), so the default round is half an hour.
    double interval = 1800;
    // Defragmenting migrations in the list schedule (ListOptions::defrag): a search policy weighs
    // what a move costs against what the gang gains, so it makes them by default.
    double defrag = 1;
    // SearchObjective::horizon for the search (greedy itself never looks ahead). Off by default:
    // on W41 it changed the average JCT by -0.1% to +0.3% for 10x the CPU (bench/history/2026-12.md, issue 25).
    double horizon = 0;
  };
  explicit SearchPolicy(Options o) : opt_(o) {}
  PolicyTraits traits() const override { return {.clairvoyant = true, .preemptive = true, .work_conserving = true}; }
  Decision decide(const SchedState& s) final;
  // False for plain greedy: nothing to search.
  virtual bool searches() const { return true; }
  // decisions, searches run, searches that beat greedy.
  std::map<std::string, double> counters() const override { return counters_; }

 protected:
  // A better candidate decision than `greedy` (scored `greedy_score`), or nothing.
  virtual std::optional<Decision> improve(const SearchProblem& p, const Decision& greedy, double greedy_score) = 0;

 private:
  Options opt_;
  std::vector<Ranked> ranked_, heap_;
  std::vector<std::pair<JobId, int>> last_passed_over_;
  double last_search_ = -kInf;
  bool last_improved_ = false;
  std::map<std::string, double> counters_;
};

// Reads margin/window/always/repeat_after/interval/defrag for the search policy.
class ParamReader;
SearchPolicy::Options read_search_options(ParamReader& r);

}  // namespace ember::sched
