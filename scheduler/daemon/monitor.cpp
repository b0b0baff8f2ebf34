// What the daemon counts for its web endpoint (starts and their waits, ended jobs and their
// completion times, preemptions, admission decisions, socket requests' latency, the utilisation
// history) and the snapshot of its state it publishes after each turn of the event loop
// (snapshot.h). The work per turn grows with the jobs alive and the pool, not with the history.
#include <algorithm>

#include "scheduler/daemon/access.h"
#include "scheduler/daemon/daemon_impl.h"

namespace ember::sched::daemon_impl {

namespace {

constexpr size_t kRecentEnded = 20;      // ended jobs the dashboard still lists
constexpr size_t kHistoryPoints = 4000;  // utilisation points kept (each is a change)

Histogram& histogram(std::map<std::string, Histogram>& m, const std::string& key, std::vector<double> (*bounds)()) {
  auto it = m.find(key);
  if (it == m.end()) it = m.emplace(key, Histogram(bounds())).first;
  return it->second;
}

}  // namespace

void Daemon::count_start(const JobRecord& r, double now) {
  histogram(counts_.queue_wait, r.info.spec().queue(), job_seconds_buckets)
      .observe(std::max(0.0, now - r.job.queued_since));
}

void Daemon::count_end(const JobRecord& r) {
  const std::string& team = r.info.spec().queue();
  ++counts_.ended[{state_name(r.info.state()), team}];
  if (r.info.state() == proto::DONE)
    histogram(counts_.completion, team, job_seconds_buckets)
        .observe(std::max(0.0, r.info.finish_time() - r.info.submit_time()));
  counts_.recent_ended.push_back(r.info.id());
  if (counts_.recent_ended.size() > kRecentEnded) counts_.recent_ended.erase(counts_.recent_ended.begin());
}

void Daemon::count_request(const std::string& kind, double seconds) {
  histogram(counts_.request_seconds, kind, request_seconds_buckets).observe(seconds);
}

void Daemon::record_usage(double now) {
  const int busy = cluster_.busy(), queued = count_state(proto::QUEUED);
  const std::vector<UsagePoint>* h = counts_.history.get();
  if (h && !h->empty() && h->back().busy == busy && h->back().queued == queued) return;
  auto next = std::make_shared<std::vector<UsagePoint>>();
  const size_t keep = h ? std::min(h->size(), kHistoryPoints - 1) : 0;
  if (h) next->assign(h->end() - static_cast<std::ptrdiff_t>(keep), h->end());
  next->push_back({now, busy, queued});
  counts_.history = std::move(next);
}

std::vector<DeviceView> Daemon::device_views() const {
  std::vector<DeviceView> out;
  for (size_t d = 0; d < pool_.devices.size(); ++d) {
    const PoolDevice& pd = pool_.devices[d];
    DeviceView v{pd.name, pd.type.empty() ? (pd.cuda_index >= 0 ? "gpu" : "cpu") : pd.type, pd.memory_gib, "free", -1};
    v.job = cluster_.owner(static_cast<int>(d));
    if (v.job >= 0) {
      auto it = jobs_.find(v.job);
      v.state = it != jobs_.end() && it->second.info.state() == proto::STOPPING ? "stopping" : "busy";
    }
    out.push_back(std::move(v));
  }
  return out;
}

void Daemon::add_job_views(DaemonSnapshot& s) const {
  auto add = [&](const JobRecord& r) {
    // As recorded: the readers add a running job's time since its last start themselves.
    proto::JobInfo& info = s.jobs.emplace_back(r.info);
    if (!r.info.log_path().empty()) s.logs[r.info.id()] = r.info.log_path();
    Access::redact(&info);  // the endpoint knows no caller: it shows what any user may see
  };
  for (const JobRecord* r : active_jobs()) {
    add(*r);
    ++s.job_counts[{state_name(r->info.state()), r->info.spec().queue()}];
    if (r->info.state() != proto::QUEUED) continue;
    s.queued_since[r->info.id()] = r->job.queued_since;
    if (auto it = estimates_.find(r->info.id()); it != estimates_.end())
      s.estimated_start[r->info.id()] = it->second.second + it->second.first;
  }
  for (auto it = counts_.recent_ended.rbegin(); it != counts_.recent_ended.rend(); ++it)
    if (auto j = jobs_.find(*it); j != jobs_.end() && !j->second.active()) add(j->second);
}

void Daemon::publish_snapshot() {
  const double now = wall_now();
  record_usage(now);
  auto s = std::make_shared<DaemonSnapshot>();
  s->taken_at = now;
  s->policy = policy_->name();
  s->draining = draining_;
  s->devices = device_views();
  s->job_counts = counts_.ended;
  add_job_views(*s);
  for (const auto& [team, share] : shares_) {
    TeamView t{team, share, 0, 0, 0};
    for (const JobRecord* r : active_jobs()) {
      if (r->info.spec().queue() != team) continue;
      const proto::JobState st = r->info.state();
      t.queued += st == proto::QUEUED;
      t.running += st == proto::RUNNING;
      if (st == proto::RUNNING || st == proto::STOPPING) t.held += r->info.devices_size();
    }
    s->teams.push_back(std::move(t));
  }
  s->preemptions = counts_.preemptions;
  s->admission = counts_.admission;
  s->queue_wait = counts_.queue_wait;
  s->completion = counts_.completion;
  s->request_seconds = counts_.request_seconds;
  s->history = counts_.history;
  web_->publish(std::move(s));
}

}  // namespace ember::sched::daemon_impl
