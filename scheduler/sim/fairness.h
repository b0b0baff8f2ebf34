// Fairness between teams, measured on a simulation's results: per-team average JCT and slowdown,
// finish-time fairness (Themis' rho: a team's average JCT on the shared cluster over its average
// JCT had it run alone on its guaranteed share) and Jain's index over the teams' rho. A rho above 1
// means the team would have done better on its share alone: the sharing cost it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "scheduler/sim/simulator.h"
#include "scheduler/teams.h"

namespace ember::sched {

struct TeamFairness {
  std::string team;
  int share = 0;       // guaranteed devices
  int alone_gpus = 0;  // the cluster its jobs ran on alone: its share, or its widest gang when wider
  double demand = 0;   // devices its jobs keep busy on average (team_demand)
  int jobs = 0;
  double avg_jct = 0, avg_slowdown = 0;  // on the shared cluster; slowdown = JCT / duration
  double alone_avg_jct = 0;
  double rho = 0;  // avg_jct / alone_avg_jct
};

struct Fairness {
  std::vector<TeamFairness> teams;  // by team name
  double max_rho = 0, min_rho = 0;
  double jain = 0;  // (sum rho)^2 / (teams x sum rho^2): 1 when every team's rho is the same
  // Per job: JCT shared / JCT alone, over every job.
  double job_rho_p50 = 0, job_rho_p90 = 0, job_rho_max = 0;
  // Teams whose demand is below their share, and the largest rho among them (the quota level's
  // promise: each should do no worse than alone on its share, rho <= 1). 0 when there are none.
  int under_share_teams = 0;
  double under_share_max_rho = 0;
};

// Runs a team's jobs alone on `gpus` devices (the caller's policy and cluster shape) and returns
// the result with jobs in the order given.
using AloneRun = std::function<SimResult(const std::vector<JobSpec>& jobs, int gpus)>;

// `shared` is the simulation of `trace` on the whole cluster (jobs in trace order). Throws
// ember::Error when a job's team has no share.
Fairness measure_fairness(const std::vector<JobSpec>& trace, const SimResult& shared, const Shares& shares,
                          const AloneRun& run_alone);

}  // namespace ember::sched
