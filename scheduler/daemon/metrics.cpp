#include "scheduler/daemon/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>
#include <vector>

namespace ember::sched {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Exposition {
 public:
  // HELP and TYPE of a family; its samples follow.
  void family(const std::string& name, const char* type, const char* help) {
    out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const Labels& labels, double v) {
    out_ += name + label_set(labels) + " " + prometheus_number(v) + "\n";
  }
  void histogram(const std::string& name, Labels labels, const Histogram& h) {
    uint64_t cumulative = 0;
    labels.emplace_back("le", "");
    for (size_t i = 0; i <= h.bounds.size(); ++i) {
      cumulative += h.buckets[i];
      labels.back().second = i < h.bounds.size() ? prometheus_number(h.bounds[i]) : "+Inf";
      sample(name + "_bucket", labels, static_cast<double>(cumulative));
    }
    labels.pop_back();
    sample(name + "_sum", labels, h.sum);
    sample(name + "_count", labels, static_cast<double>(h.count));
  }
  std::string& str() { return out_; }

 private:
  static std::string label_set(const Labels& labels) {
    if (labels.empty()) return "";
    std::string s = "{";
    for (size_t i = 0; i < labels.size(); ++i)
      s += (i ? "," : "") + labels[i].first + "=\"" + prometheus_label(labels[i].second) + "\"";
    return s + "}";
  }
  std::string out_;
};

void devices(Exposition& e, const DaemonSnapshot& s) {
  e.family("ember_sched_devices", "gauge", "Devices of the pool by state (free, busy, stopping) and type.");
  std::map<std::pair<std::string, std::string>, int> n;
  std::set<std::string> types;
  for (const DeviceView& d : s.devices) types.insert(d.type);
  for (const std::string& t : types)
    for (const char* st : {"free", "busy", "stopping"}) n[{st, t}] = 0;  // absent series read as gaps
  for (const DeviceView& d : s.devices) ++n[{d.state, d.type}];
  for (const auto& [k, v] : n) e.sample("ember_sched_devices", {{"state", k.first}, {"type", k.second}}, v);
}

void jobs_and_queue(Exposition& e, const DaemonSnapshot& s) {
  e.family("ember_sched_jobs", "gauge",
           "Jobs the daemon knows by state and team (the team is the spec's queue; ended jobs included).");
  for (const auto& [k, v] : s.job_counts) e.sample("ember_sched_jobs", {{"state", k.first}, {"team", k.second}}, v);
  e.family("ember_sched_queue_wait_seconds", "histogram",
           "Seconds a job waited in the queue before a start, per start (a requeued job waits again).");
  for (const auto& [team, h] : s.queue_wait) e.histogram("ember_sched_queue_wait_seconds", {{"team", team}}, h);
  e.family("ember_sched_job_completion_seconds", "histogram",
           "Job completion time: seconds from submission to the end of jobs that finished with exit 0.");
  for (const auto& [team, h] : s.completion) e.histogram("ember_sched_job_completion_seconds", {{"team", team}}, h);
  e.family("ember_sched_preemptions_total", "counter", "Preemptions of jobs (through their checkpoints) by team.");
  for (const auto& [team, v] : s.preemptions) e.sample("ember_sched_preemptions_total", {{"team", team}}, v);
  e.family("ember_sched_admission_decisions_total", "counter",
           "Submissions by decision: admitted, deferred (estimated start over --admit-target) or rejected "
           "(a bad or unrunnable spec, a full queue, a limit).");
  for (const auto& [d, v] : s.admission) e.sample("ember_sched_admission_decisions_total", {{"decision", d}}, v);
}

void teams(Exposition& e, const DaemonSnapshot& s) {
  if (s.teams.empty()) return;
  e.family("ember_sched_team_quota_devices", "gauge", "Each team's share of the pool: devices guaranteed (--quota).");
  for (const TeamView& t : s.teams) e.sample("ember_sched_team_quota_devices", {{"team", t.name}}, t.share);
  e.family("ember_sched_team_devices_in_use", "gauge", "Devices each team's running and stopping jobs hold.");
  for (const TeamView& t : s.teams) e.sample("ember_sched_team_devices_in_use", {{"team", t.name}}, t.held);
  e.family("ember_sched_team_usage_ratio", "gauge",
           "Devices in use over the team's quota (above 1: it borrows idle shares of other teams).");
  for (const TeamView& t : s.teams)
    e.sample("ember_sched_team_usage_ratio", {{"team", t.name}}, t.share > 0 ? double(t.held) / t.share : 0.0);
}

void job_progress(Exposition& e, const DaemonSnapshot& s, ProgressReader& reader, double now) {
  struct Row {
    Labels labels;
    proto::JobProgress p;
    double run_s;
  };
  std::vector<Row> rows;
  for (const proto::JobInfo& j : s.jobs) {
    if (j.state() != proto::RUNNING && j.state() != proto::STOPPING) continue;
    auto log = s.logs.find(j.id());
    std::optional<proto::JobProgress> p = log == s.logs.end() ? std::nullopt : reader.read(log->second);
    rows.push_back({{{"job_id", std::to_string(j.id())}, {"name", j.spec().name()}, {"team", j.spec().queue()}},
                    p.value_or(proto::JobProgress()),
                    j.run_seconds() + std::max(0.0, now - j.last_start())});
  }
  e.family("ember_sched_job_run_seconds", "gauge", "Seconds each running job has held devices, every run included.");
  for (const Row& r : rows) e.sample("ember_sched_job_run_seconds", r.labels, r.run_s);
  e.family("ember_sched_job_samples_per_second", "gauge", "Throughput each running job last reported.");
  for (const Row& r : rows)
    if (r.p.has_samples_per_s()) e.sample("ember_sched_job_samples_per_second", r.labels, r.p.samples_per_s());
  e.family("ember_sched_job_epoch", "gauge", "The epoch each running job last reported (from 1).");
  for (const Row& r : rows)
    if (r.p.epoch() > 0) e.sample("ember_sched_job_epoch", r.labels, static_cast<double>(r.p.epoch()));
  e.family("ember_sched_job_step", "gauge", "The optimizer step each running job last reported.");
  for (const Row& r : rows)
    if (r.p.epoch() > 0) e.sample("ember_sched_job_step", r.labels, static_cast<double>(r.p.step()));
  e.family("ember_sched_job_loss", "gauge", "The training loss each running job last reported.");
  for (const Row& r : rows)
    if (r.p.has_loss()) e.sample("ember_sched_job_loss", r.labels, r.p.loss());
}

void requests(Exposition& e, const DaemonSnapshot& s, const std::map<std::pair<std::string, int>, long long>& http) {
  e.family("ember_sched_request_duration_seconds", "histogram",
           "Seconds from accepting a client's request on the daemon's socket to writing its answer, by request.");
  for (const auto& [kind, h] : s.request_seconds)
    e.histogram("ember_sched_request_duration_seconds", {{"request", kind}}, h);
  e.family("ember_sched_http_requests_total", "counter", "Requests to this HTTP endpoint by path and status code.");
  for (const auto& [k, v] : http)
    e.sample("ember_sched_http_requests_total", {{"path", k.first}, {"code", std::to_string(k.second)}},
             static_cast<double>(v));
}

}  // namespace

std::string prometheus_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string prometheus_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

std::string render_metrics(const DaemonSnapshot& s, ProgressReader& progress,
                           const std::map<std::pair<std::string, int>, long long>& http, double now) {
  Exposition e;
  e.family("ember_sched_info", "gauge", "The daemon's scheduling policy (value 1).");
  e.sample("ember_sched_info", {{"policy", s.policy}}, 1);
  e.family("ember_sched_draining", "gauge", "1 while the daemon drains (takes no new jobs), else 0.");
  e.sample("ember_sched_draining", {}, s.draining ? 1 : 0);
  devices(e, s);
  jobs_and_queue(e, s);
  teams(e, s);
  job_progress(e, s, progress, now);
  requests(e, s, http);
  return std::move(e.str());
}

}  // namespace ember::sched
