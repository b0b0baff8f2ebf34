#include "scheduler/sim/fairness.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "scheduler/stats.h"

namespace ember::sched {

Fairness measure_fairness(const std::vector<JobSpec>& trace, const SimResult& shared, const Shares& shares,
                          const AloneRun& run_alone) {
  EMBER_CHECK(shared.jobs.size() == trace.size(), "fairness: the simulation has ", shared.jobs.size(),
              " jobs but the trace ", trace.size());
  check_teams(trace, shares, "the team shares");
  std::map<std::string, std::vector<size_t>> members;
  for (size_t i = 0; i < trace.size(); ++i) members[trace[i].queue].push_back(i);
  const std::map<std::string, double> demand = team_demand(trace);

  Fairness f;
  std::vector<double> job_rho;
  for (const auto& [team, idx] : members) {
    TeamFairness t;
    t.team = team;
    t.share = shares.at(team);
    t.demand = demand.at(team);
    t.jobs = static_cast<int>(idx.size());
    std::vector<JobSpec> alone_trace;
    int widest = 1;
    for (size_t i : idx) {
      alone_trace.push_back(trace[i]);
      widest = std::max(widest, trace[i].gpus);
    }
    t.alone_gpus = std::max(t.share, widest);
    const SimResult alone = run_alone(alone_trace, t.alone_gpus);
    EMBER_CHECK(alone.jobs.size() == idx.size(), "fairness: team '", team, "' ran ", alone.jobs.size(),
                " jobs alone, expected ", idx.size());
    double jct = 0, slow = 0, alone_jct = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
      const JobResult& r = shared.jobs[idx[k]];
      jct += r.jct();
      slow += r.duration > 0 ? r.jct() / r.duration : 1.0;
      alone_jct += alone.jobs[k].jct();
      if (alone.jobs[k].jct() > 0) job_rho.push_back(r.jct() / alone.jobs[k].jct());
    }
    t.avg_jct = jct / t.jobs;
    t.avg_slowdown = slow / t.jobs;
    t.alone_avg_jct = alone_jct / t.jobs;
    t.rho = t.alone_avg_jct > 0 ? t.avg_jct / t.alone_avg_jct : 1.0;
    f.teams.push_back(t);
  }
  double sum = 0, sum2 = 0;
  f.min_rho = kInf;
  for (const TeamFairness& t : f.teams) {
    sum += t.rho, sum2 += t.rho * t.rho;
    f.max_rho = std::max(f.max_rho, t.rho);
    f.min_rho = std::min(f.min_rho, t.rho);
    if (t.demand < t.share) {
      ++f.under_share_teams;
      f.under_share_max_rho = std::max(f.under_share_max_rho, t.rho);
    }
  }
  if (f.teams.empty()) f.min_rho = 0;
  f.jain = sum2 > 0 ? sum * sum / (static_cast<double>(f.teams.size()) * sum2) : 1.0;
  std::sort(job_rho.begin(), job_rho.end());
  f.job_rho_p50 = sorted_percentile(job_rho, 0.5);
  f.job_rho_p90 = sorted_percentile(job_rho, 0.9);
  f.job_rho_max = job_rho.empty() ? 0 : job_rho.back();
  return f;
}

}  // namespace ember::sched
