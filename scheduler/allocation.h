// The heterogeneity-aware allocation program (Gavel's policies as optimisation problems): time
// shares X[j][t] in [0, 1] of each job j on each device type t, with sum_t X[j][t] <= 1 and
// sum_j gpus[j] X[j][t] <= capacity[t]. Objectives over the jobs' throughputs sum_t speed[j][t]
// X[j][t]:
// - max-min fairness: maximise z, the smallest normalised throughput, where a job's throughput is
//   normalised by what an equal share of every type would give it (sum_t speed x capacity / total);
//   spare capacity then goes to total normalised throughput (a small second term);
// - total throughput: maximise sum_j sum_t speed[j][t] X[j][t].
// Solved by the LP solver (scheduler/lp.h). The gavel policy (policies/gavel.cpp) rounds it into
// placements every round.
#pragma once

#include <vector>

namespace ember::sched {

struct AllocationProblem {
  std::vector<std::vector<double>> speed;  // [job][type] > 0
  std::vector<int> gpus;                   // [job]
  std::vector<int> capacity;               // [type]
  bool throughput = false;                 // total throughput instead of max-min fairness
};

struct Allocation {
  std::vector<std::vector<double>> share;  // X[job][type]
  double objective = 0;                    // z (max-min) or the total throughput
};

// Throws ember::Error for mismatched sizes, a speed <= 0, or a build without an LP solver. A job
// wider than a type's capacity gets no share of it.
Allocation solve_allocation(const AllocationProblem& p);

// The max-min objective of a given allocation: the smallest normalised throughput (what
// solve_allocation maximises; for tests and reports).
double min_normalised_throughput(const AllocationProblem& p, const std::vector<std::vector<double>>& share);

}  // namespace ember::sched
