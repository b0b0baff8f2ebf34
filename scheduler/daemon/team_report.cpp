// `ember sched status --teams`: each team's share, what it holds and has queued now, and fairness
// over its completed jobs, measured as the simulator measures it (scheduler/sim/fairness.h): average
// JCT and slowdown on the daemon, and finish-time fairness rho against the same jobs run alone on
// the team's share. "Alone" is a simulation: the jobs' submission times and their own work (run
// time less work lost to preemptions) on a pool of the share's devices (of each type in proportion,
// on a typed pool), under the daemon's policy without the team level. The daemon cannot run the
// jobs twice; the simulator is how the scheduler's reports define rho everywhere.
#include <algorithm>
#include <map>

#include "core/error.h"
#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/policy.h"
#include "scheduler/sim/fairness.h"

namespace ember::sched::daemon_impl {

void Daemon::team_report(proto::Response& resp) const {
  EMBER_CHECK(!shares_.empty(), "status --teams: this daemon has no team quotas (start it with --quota FILE)");
  std::map<std::string, proto::TeamInfo> teams;
  for (const auto& [team, share] : shares_) {
    proto::TeamInfo& t = teams[team];
    t.set_name(team);
    t.set_share(share);
  }
  // The completed jobs, in submission order, with their times from the first one's submission.
  std::vector<const JobRecord*> done;
  for (const auto& [id, r] : jobs_) {
    auto it = teams.find(r.job.spec.queue);
    if (it == teams.end()) continue;  // a team the quota file no longer names (never active: see start)
    proto::TeamInfo& t = it->second;
    const proto::JobState st = r.info.state();
    if (st == proto::QUEUED) t.set_queued(t.queued() + 1);
    if (st == proto::RUNNING || st == proto::STOPPING) {
      t.set_running(t.running() + (st == proto::RUNNING));
      t.set_devices_held(t.devices_held() + r.info.devices_size());
    }
    if (st == proto::DONE) done.push_back(&r);
  }
  std::sort(done.begin(), done.end(), [](const JobRecord* a, const JobRecord* b) {
    return a->info.submit_time() != b->info.submit_time() ? a->info.submit_time() < b->info.submit_time()
                                                          : a->info.id() < b->info.id();
  });
  if (!done.empty()) {
    const double t0 = done.front()->info.submit_time();
    std::vector<JobSpec> trace;
    SimResult shared;
    for (const JobRecord* r : done) {
      JobSpec s = r->job.spec;
      s.name = std::to_string(r->info.id());
      s.submit = r->info.submit_time() - t0;
      s.duration = std::max(0.0, r->info.run_seconds() - r->info.lost_seconds());
      s.estimate = -1;
      trace.push_back(s);
      JobResult j;
      j.name = s.name;
      j.queue = s.queue;
      j.submit = s.submit;
      j.duration = s.duration;
      j.gpus = s.gpus;
      j.first_start = r->info.first_start() - t0;
      j.finish = std::max(r->info.finish_time() - t0, s.submit);
      j.run_time = r->info.run_seconds();
      shared.jobs.push_back(j);
    }
    const Topology& topo = cluster_.topology();
    std::vector<DeviceType> types;
    for (int k = 0; k < topo.num_types(); ++k) types.push_back({topo.type_name(k), topo.devices_of_type(k)});
    const Fairness f = measure_fairness(trace, shared, shares_, [&](const std::vector<JobSpec>& jobs, int gpus) {
      const Topology alone = speed_fn_ ? Topology::typed(share_of_types(types, gpus), 0) : Topology::uniform(gpus, 0);
      std::unique_ptr<Policy> p = make_policy(opt_.policy, opt_.params);
      SimOptions so;
      if (speed_fn_) so.speed = speeds_on(alone);
      return simulate(jobs, alone, *p, so);
    });
    for (const TeamFairness& tf : f.teams) {
      proto::TeamInfo& t = teams.at(tf.team);
      t.set_completed(tf.jobs);
      t.set_avg_jct_s(tf.avg_jct);
      t.set_avg_slowdown(tf.avg_slowdown);
      t.set_alone_avg_jct_s(tf.alone_avg_jct);
      t.set_rho(tf.rho);
    }
    resp.set_teams_jain(f.jain);
    resp.set_teams_max_rho(f.max_rho);
  }
  for (auto& [name, t] : teams) *resp.add_teams() = std::move(t);
}

}  // namespace ember::sched::daemon_impl
