// List scheduling: the one placement engine behind the ordering policies and the starting point of
// the search policies. A policy ranks jobs (smaller key first); list_schedule walks that order and
// places each job with best fit. Without preemption it fills the free devices (stopping at the
// first job that does not fit when `strict`). With preemption it first picks, by device count,
// the best-ranked set of jobs that the whole cluster could hold, then starts the waiting ones in
// that set, preempting running jobs outside the set only when a waiting job needs their devices,
// and finally fills what is left without preempting anyone.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "scheduler/policy.h"

namespace ember::sched {

// Lexicographic rank, smaller first; the job id breaks the last tie so that every policy is
// deterministic.
struct Ranked {
  double k1 = 0, k2 = 0, k3 = 0;
  const Job* job = nullptr;
  // Compared before k1: a class a wrapper puts the policy's own keys under (the team level's
  // guaranteed jobs ahead of borrowing ones, scheduler/teams.h); 0 for a policy on its own.
  int k0 = 0;
  bool operator<(const Ranked& o) const {
    if (k0 != o.k0) return k0 < o.k0;
    if (k1 != o.k1) return k1 < o.k1;
    if (k2 != o.k2) return k2 < o.k2;
    if (k3 != o.k3) return k3 < o.k3;
    return job->id < o.job->id;
  }
  bool operator>(const Ranked& o) const { return o < *this; }
};

struct ListOptions {
  bool preemptive = false;
  bool strict = false;  // non-preemptive only: stop at the first waiting job that does not fit
  // Preemptive only: defragmenting migrations. A waiting gang that needs one node, passed over
  // although enough devices are free (scattered over nodes), gets the node from which the fewest
  // devices must move: the running jobs there are preempted and started again on free devices
  // elsewhere in the same decision (each pays a preemption), moving at most `defrag` x the gang's
  // devices (0: never). With nodes, Philly's 8-device jobs otherwise wait while a quarter of the
  // devices idle in fragments (docs/scheduler/simulator.md, "Cluster model").
  double defrag = 0;
  // Devices no job may take in this decision: kept free for a gang that will start there once
  // the node's other jobs end (a reservation a search policy chose; nullptr: none).
  const Placement* hold = nullptr;
};

// What a preemptive list schedule ran into: enough for a search policy to tell that the greedy
// answer is already optimal (the walk took every job in rank order until the devices ran out).
struct ListStats {
  bool skipped_for_budget = false;  // passed over a waiting job needing more devices than were left
  bool unplaced = false;            // a waiting job that fit by count found no devices, even by preempting
  // The waiting jobs behind the two flags above, in rank order, each with the devices the walk
  // had left to hand out when it passed over it.
  std::vector<std::pair<JobId, int>> passed_over;
  // The jobs behind the decision's starts and preemptions (filled only when `collect` is set).
  bool collect = false;
  std::vector<const Job*> started, preempted;
};

// `ranked` holds every job the policy considers: waiting ones, and running ones when preemptive.
// It is consumed: the running jobs are sorted, the waiting ones heap-ordered in place and popped
// only as far as the walk reaches, so a decision over thousands of waiting jobs stays cheap when
// a few devices are free.
Decision list_schedule(const SchedState& s, std::vector<Ranked>& ranked, const ListOptions& opt = {},
                       ListStats* stats = nullptr);

// The preemptive list schedule of every job, waiting and running, ranked by `rank`, without
// ranking a running job unless it matters: when the waiting jobs, in rank order, all fit on the
// free devices (most decisions on a large cluster), the walk would keep every running job where
// it is, so that is the answer, found in time proportional to the waiting jobs alone. Otherwise
// the same as list_schedule(s, all ranked, {.preemptive = true}). `scratch` is the caller's
// buffer, reused across decisions.
Decision list_schedule_preemptive(const SchedState& s, const std::function<Ranked(const Job&)>& rank,
                                  std::vector<Ranked>& scratch, double defrag = 0, ListStats* stats = nullptr);

// Same with a rank that scores jobs a batch at a time (a network's forward pass): it appends one
// Ranked per job of `waiting`, then of `running`, to `out`. It is called once with both when the
// waiting jobs want more devices than are free (the running ones will be ranked anyway), else
// with the waiting jobs alone and, when they do not all fit, once more with the running ones.
using BatchRank = std::function<void(std::span<const Job* const> waiting, std::span<const Job* const> running,
                                     std::vector<Ranked>& out)>;
Decision list_schedule_preemptive_batch(const SchedState& s, const BatchRank& rank, std::vector<Ranked>& scratch,
                                        double defrag = 0, ListStats* stats = nullptr);

// Same on an order already sorted, with an optional preferred node per position (a search
// policy's placement genes; -1 or absent: best fit): how a search policy decodes a candidate.
Decision list_schedule_sorted(const SchedState& s, std::span<const Job* const> order, const ListOptions& opt = {},
                              const std::vector<int>* preferred_node = nullptr, ListStats* stats = nullptr);

}  // namespace ember::sched
