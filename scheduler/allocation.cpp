#include "scheduler/allocation.h"

#include <algorithm>
#include <map>
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
  // Jobs with the same gang and speeds are one class of `count` jobs with the same shares: the
  // program's optimum is the same (averaging any solution over a class keeps it feasible, keeps the
  // total and does not lower the smallest throughput), and a backlog of thousands of jobs of a few
  // models and gang sizes is a program of a few dozen classes.
  std::map<std::pair<int, std::vector<double>>, size_t> class_of;
  std::vector<size_t> cls(jobs);
  std::vector<size_t> first;  // a job of each class
  std::vector<double> count;
  for (size_t j = 0; j < jobs; ++j) {
    auto [it, added] = class_of.try_emplace({p.gpus[j], p.speed[j]}, first.size());
    if (added) first.push_back(j), count.push_back(0);
    cls[j] = it->second;
    count[it->second] += 1;
  }
  const size_t classes = first.size();
  LinearProgram lp;
  const int z = p.throughput ? -1 : lp.add_var(0, kInf, 1);
  const double eps = p.throughput ? 1.0 : 1e-3 / jobs;
  std::vector<std::vector<int>> x(classes, std::vector<int>(types));
  std::vector<std::vector<std::pair<int, double>>> capacity(types);
  for (size_t c = 0; c < classes; ++c) {
    const size_t j = first[c];
    const double norm = p.throughput ? 1.0 : equal_share(p, j);
    std::vector<std::pair<int, double>> one, thr;
    for (size_t t = 0; t < types; ++t) {
      const bool fits = p.capacity[t] >= p.gpus[j];
      x[c][t] = lp.add_var(0, fits ? 1 : 0, count[c] * eps * p.speed[j][t] / norm);
      one.push_back({x[c][t], 1});
      thr.push_back({x[c][t], p.speed[j][t] / norm});
      capacity[t].push_back({x[c][t], count[c] * p.gpus[j]});
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
    for (size_t t = 0; t < types; ++t) a.share[j][t] = std::clamp(s.x[x[cls[j]][t]], 0.0, 1.0);
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
