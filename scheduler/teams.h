// Teams sharing one cluster (Philly's virtual clusters, Slurm accounts): hierarchical quotas.
//
// Static level: each team gets a guaranteed share of the devices, read from a quota file or
// planned from its historic demand by a linear program (plan_shares). Dynamic level: a team's
// idle share is lent to the others, and taken back by preemption (through the job's checkpoint,
// as any preemption) when the owner's jobs arrive (TeamQuotas). Inside a team, any ordering
// policy (fcfs, sjf, priority, las, gittins, srsf) decides which of its jobs go first.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/cluster.h"
#include "scheduler/job.h"
#include "scheduler/policy.h"

namespace ember::sched {

// Team (a job's JobSpec::queue) -> guaranteed devices.
using Shares = std::map<std::string, int>;

// A quota file: one team per line, "TEAM DEVICES" (whitespace between; '#' starts a comment).
// Throws ember::Error naming the file and line for a malformed line, a repeated team, a negative
// share, or shares adding up to more than `capacity` devices.
Shares read_shares(const std::string& path, int capacity);
Shares parse_shares(const std::string& text, const std::string& name, int capacity);

// Every job's team has a share; else an ember::Error naming the job, its team and the teams known.
void check_teams(const std::vector<JobSpec>& jobs, const Shares& shares, const std::string& source);

// Each team's demand: the devices its jobs would keep busy on average over the arrival window
// (device-seconds / window length; the whole span of the jobs when they all arrive at once).
std::map<std::string, double> team_demand(const std::vector<JobSpec>& history);

// The static level. Shares that maximise the satisfied demand, sum(min(share, demand)), within
// `capacity` devices and at least `minimum` for each team (absent: 0); among those, the ones that maximise the
// smallest satisfied fraction min(share / demand) (a second program over the first's optimum),
// so an oversubscribed cluster is shared in proportion to demand. Devices left over go out in
// proportion to demand, and shares are rounded to whole devices by largest remainder. Throws
// ember::Error when the minimum shares alone exceed the capacity.
Shares plan_shares(const std::map<std::string, double>& demand, int capacity, const Shares& minimum);
// Minimums: `devices` for every team of `demand`; or each team's widest gang in `jobs`, so that
// every job can be guaranteed (a job wider than its team's share only ever borrows).
Shares uniform_minimum(const std::map<std::string, double>& demand, int devices);
Shares widest_gangs(const std::vector<JobSpec>& jobs);

// A share of `devices` on a cluster of device types, as the devices a team would own alone: each
// type in proportion to its count in the cluster, rounded by largest remainder (ties to the type
// listed first), types that get none left out. What finish-time fairness runs a team alone on.
// Throws ember::Error when `devices` is below 1 or above the cluster's total.
std::vector<DeviceType> share_of_types(const std::vector<DeviceType>& cluster, int devices);

struct QuotaOptions {
  // Seconds a guaranteed job waits before it may preempt borrowing jobs for its devices (it goes
  // first on free devices at once). 0: lent devices are taken back as soon as the owner asks.
  double grace = 0;
  // Defragmenting migrations for guaranteed gangs that fit by count but find no node
  // (ListOptions::defrag): a share is devices, and a gang needs them on one node.
  double defrag = 1;
  // Whose guarantee holds. Within quotas (the default under a preemptive policy), a team's jobs
  // within its share go first only while the team is *within its quota*: the devices its jobs
  // ask for (running and waiting), averaged exponentially over `horizon` seconds, are no more
  // than its share. A team that asks for more than its share on average is scheduled by the
  // inner policy alone, with the jobs beyond every team's share: its guarantee would hold devices
  // for its backlog that other teams' short jobs could use, and alone on its share it would wait
  // in its own queue anyway. The strict level (`strict` 1; the default under a non-preemptive
  // policy, whose queue grows with any delay and would count against a team that lost its
  // guarantee) keeps every team's guarantee at all times. -1: by the inner policy.
  double horizon = 86400;
  double strict = -1;
};
// From `--set quota.grace=S,quota.defrag=X,quota.horizon=S,quota.strict=0|1`; unknown quota.* keys
// are errors.
QuotaOptions quota_options(const PolicyParams& params);

// The dynamic level around a ranking policy (scheduler/ranking.h): per team, the policy's order
// is walked and the jobs whose devices fit within the share of a team whose guarantee holds
// (QuotaOptions::strict) are guaranteed, the rest borrow. Guaranteed jobs of every team rank ahead
// of every borrowing one, so a preemptive list schedule takes lent devices back for a team's
// guaranteed jobs. At the strict level, and under a non-preemptive inner policy, borrowing jobs
// already running rank ahead of borrowing ones waiting: they are never preempted for each other,
// only reclaimed; within quotas under a preemptive policy the borrowers keep the policy's order.
// Named "<inner>+quota". Throws ember::Error when `inner` does not rank (search, backfill, learned
// policies), for a grace outside the strict level, and at a decision when a job's team has no
// share.
std::unique_ptr<Policy> make_team_quotas(std::unique_ptr<Policy> inner, Shares shares, QuotaOptions opt = {});

}  // namespace ember::sched
