#include "scheduler/daemon/dashboard.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "scheduler/daemon/metrics.h"
#include "scheduler/daemon/record.h"
#include "scheduler/sim/report.h"

namespace ember::sched {

namespace {

// JSON has no infinities or NaN: those are null.
std::string num(double v) {
  return std::isfinite(v) ? prometheus_number(v) : "null";
}

std::string progress_json(const std::optional<proto::JobProgress>& p) {
  if (!p) return "null";
  std::string o = "{\"epoch\": " + std::to_string(p->epoch()) + ", \"epochs\": " + std::to_string(p->epochs()) +
                  ", \"step\": " + std::to_string(p->step());
  o += ", \"loss\": " + (p->has_loss() ? num(p->loss()) : "null");
  o += ", \"samples_per_s\": " + (p->has_samples_per_s() ? num(p->samples_per_s()) : "null") + "}";
  return o;
}

std::string job_json(const DaemonSnapshot& s, const proto::JobInfo& j, ProgressReader& progress, double now) {
  const bool on_devices = j.state() == proto::RUNNING || j.state() == proto::STOPPING;
  const bool queued = j.state() == proto::QUEUED;
  auto since = s.queued_since.find(j.id());
  const double queued_since = since != s.queued_since.end() ? since->second : j.submit_time();
  auto est = s.estimated_start.find(j.id());
  auto log = s.logs.find(j.id());
  std::string o = "{\"id\": " + std::to_string(j.id()) + ", \"name\": " + json_string(j.spec().name()) +
                  ", \"team\": " + json_string(j.spec().queue()) + ", \"owner\": " + json_string(j.owner()) +
                  ", \"state\": " + json_string(state_name(j.state())) +
                  ", \"devices\": " + std::to_string(j.spec().has_devices() ? j.spec().devices() : 1);
  o += ", \"device_names\": [";
  for (int i = 0; i < j.device_names_size(); ++i) o += (i ? ", " : "") + json_string(j.device_names(i));
  o += "], \"submit_time\": " + num(j.submit_time());
  o += ", \"wait_s\": " + (queued ? num(std::max(0.0, now - queued_since)) : "null");
  o += ", \"estimated_start\": " + (queued && est != s.estimated_start.end() ? num(est->second) : "null");
  o += ", \"run_s\": " + num(j.run_seconds() + (on_devices ? std::max(0.0, now - j.last_start()) : 0.0));
  o += ", \"finish_time\": " + (j.finish_time() > 0 ? num(j.finish_time()) : "null");
  o += ", \"preemptions\": " + std::to_string(j.preemptions()) + ", \"reason\": " + json_string(j.reason());
  o += ", \"progress\": " + progress_json(log == s.logs.end() ? std::nullopt : progress.read(log->second)) + "}";
  return o;
}

}  // namespace

std::string render_state_json(const DaemonSnapshot& s, ProgressReader& progress, double now) {
  std::string o = "{\"now\": " + num(now) + ", \"taken_at\": " + num(s.taken_at) +
                  ", \"policy\": " + json_string(s.policy) + ", \"draining\": " + (s.draining ? "true" : "false");
  o += ",\n \"devices\": [";
  for (size_t i = 0; i < s.devices.size(); ++i) {
    const DeviceView& d = s.devices[i];
    o += std::string(i ? ",\n  " : "\n  ") + "{\"name\": " + json_string(d.name) +
         ", \"type\": " + json_string(d.type) + ", \"memory_gib\": " + num(d.memory_gib) +
         ", \"state\": " + json_string(d.state) + ", \"job\": " + (d.job >= 0 ? std::to_string(d.job) : "null") + "}";
  }
  o += "],\n \"jobs\": [";
  for (size_t i = 0; i < s.jobs.size(); ++i) o += (i ? ",\n  " : "\n  ") + job_json(s, s.jobs[i], progress, now);
  o += "],\n \"teams\": [";
  for (size_t i = 0; i < s.teams.size(); ++i) {
    const TeamView& t = s.teams[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + json_string(t.name) + ", \"share\": " + std::to_string(t.share) +
         ", \"held\": " + std::to_string(t.held) + ", \"queued\": " + std::to_string(t.queued) +
         ", \"running\": " + std::to_string(t.running) + "}";
  }
  o += "],\n \"history\": [";
  if (s.history)
    for (size_t i = 0; i < s.history->size(); ++i) {
      const UsagePoint& p = (*s.history)[i];
      o += (i ? ", [" : "[") + num(p.time) + ", " + std::to_string(p.busy) + ", " + std::to_string(p.queued) + "]";
    }
  return o + "]}\n";
}

}  // namespace ember::sched
