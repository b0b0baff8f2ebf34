#include "scheduler/allocation.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "scheduler/job.h"
#include "scheduler/lp.h"

namespace ember::sched {
namespace {

// What an equal share of every type gives job j: the normaliser of max-min fairness.
double equal_share(const AllocationProblem& p, size_t j) {
  const double total = std::accumulate(p.capacity.begin(), p.capacity.end(), 0.0);
  double e = 0;
  for (size_t t = 0; t < p.capacity.size(); ++t) e += p.speed[j][t] * p.capacity[t];
  return total > 0 ? e / total : 1.0;
}

}  // namespace

Allocation solve_allocation(const AllocationProblem& p) {
  const size_t jobs = p.speed.size(), types = p.capacity.size();
  EMBER_CHECK(p.gpus.size() == jobs, "allocation: ", jobs, " jobs' speeds but ", p.gpus.size(), " gang sizes");
  for (size_t j = 0; j < jobs; ++j) {
    EMBER_CHECK(p.speed[j].size() == types, "allocation: job ", j, " has ", p.speed[j].size(), " speeds for ", types,
                " device types");
    for (double s : p.speed[j]) EMBER_CHECK(s > 0, "allocation: job ", j, " has speed ", s, ", expected > 0");
  }
  Allocation a;
  a.share.assign(jobs, std::vector<double>(types, 0));
  if (jobs == 0) return a;
  LinearProgram lp;
  const int z = p.throughput ? -1 : lp.add_var(0, kInf, 1);
  const double eps = p.throughput ? 1.0 : 1e-3 / jobs;
  std::vector<std::vector<int>> x(jobs, std::vector<int>(types));
  std::vector<std::vector<std::pair<int, double>>> capacity(types);
  for (size_t j = 0; j < jobs; ++j) {
    const double norm = p.throughput ? 1.0 : equal_share(p, j);
    std::vector<std::pair<int, double>> one, thr;
    for (size_t t = 0; t < types; ++t) {
      const bool fits = p.capacity[t] >= p.gpus[j];
      x[j][t] = lp.add_var(0, fits ? 1 : 0, eps * p.speed[j][t] / norm);
      one.push_back({x[j][t], 1});
      thr.push_back({x[j][t], p.speed[j][t] / norm});
      capacity[t].push_back({x[j][t], static_cast<double>(p.gpus[j])});
    }
    lp.add_row(one, -kInf, 1);
    if (z >= 0) {
      thr.push_back({z, -1});
      lp.add_row(thr, 0, kInf);
    }
  }
  for (size_t t = 0; t < types; ++t) lp.add_row(capacity[t], -kInf, p.capacity[t]);
  const LinearProgram::Solution s = lp.maximize("heterogeneous allocation");
  for (size_t j = 0; j < jobs; ++j)
    for (size_t t = 0; t < types; ++t) a.share[j][t] = std::clamp(s.x[x[j][t]], 0.0, 1.0);
  a.objective = p.throughput ? s.objective : s.x[z];
  return a;
}

double min_normalised_throughput(const AllocationProblem& p, const std::vector<std::vector<double>>& share) {
  double m = kInf;
  for (size_t j = 0; j < p.speed.size(); ++j) {
    double thr = 0;
    for (size_t t = 0; t < p.capacity.size(); ++t) thr += p.speed[j][t] * share[j][t];
    m = std::min(m, thr / equal_share(p, j));
  }
  return p.speed.empty() ? 0 : m;
}

}  // namespace ember::sched
