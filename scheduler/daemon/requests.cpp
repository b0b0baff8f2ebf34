// What clients ask over the socket: submit (with admission control), status, cancel, preempt,
// logs, drain; each checked against who asks (scheduler/daemon/access.h).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "core/error.h"
#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/supervisor.h"
#include "scheduler/daemon/wire.h"

namespace ember::sched::daemon_impl {

namespace fs = std::filesystem;

namespace {

// What keeps `dir` from being a job's working directory, as a phrase after its name ("" when it is
// a folder): a file there is named as one, not as a folder that does not exist.
std::string workdir_problem(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::is_directory(st)) return "";
  if (fs::exists(st)) return "is not a folder (it is a file); expected the folder the job runs in";
  return "does not exist; expected the folder the job runs in";
}

// A job's working directory is a folder and its command a program found from there.
void check_runnable(const proto::JobSpec& spec) {
  const std::string workdir = workdir_problem(spec.workdir());
  EMBER_CHECK(workdir.empty(), "job '", spec.name(), "': working directory '", spec.workdir(), "' ", workdir);
  const std::string search = program_search_path(spec);
  EMBER_CHECK(
      !find_program(spec.command(), spec.workdir(), search).empty(), "job '", spec.name(), "': command '",
      spec.command(), "' is not an executable file",
      spec.command().find('/') == std::string::npos ? " on the PATH" : (" (relative to " + spec.workdir() + ")"));
}

// A request's name in the metrics' label.
std::string request_kind(const proto::Request& req) {
  switch (req.body_case()) {
    case proto::Request::kSubmit:
      return "submit";
    case proto::Request::kStatus:
      return "status";
    case proto::Request::kCancel:
      return "cancel";
    case proto::Request::kPreempt:
      return "preempt";
    case proto::Request::kLogs:
      return "logs";
    case proto::Request::kDrain:
      return "drain";
    default:
      return "empty";
  }
}

}  // namespace

void Daemon::accept_all() {
  // Every connection waiting now is one batch: the requests are handled in arrival order, their
  // changes made durable together (one sync: group commit), and only then answered. Under many
  // clients this is what keeps each request's latency near the cost of one sync rather than of one
  // sync per request ahead of it.
  struct Answer {
    int fd;
    proto::Response resp;
    std::string kind;  // the request's, for its latency (web endpoint)
    double accepted;
  };
  std::vector<Answer> batch;
  store_->begin_batch();
  while (batch.size() < 256) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) break;
    const double accepted = wall_now();
    proto::Response resp;
    std::string kind = "unreadable";
    try {
      const Identity who = peer_identity(fd);
      proto::Request req;
      EMBER_CHECK(req.ParseFromString(read_frame(fd, 5)), "the request does not parse");
      kind = request_kind(req);
      resp = handle(req, who);
    } catch (const std::exception& e) {
      resp.Clear();
      resp.set_ok(false);
      resp.set_error(e.what());
    }
    batch.push_back({fd, std::move(resp), std::move(kind), accepted});
  }
  try {
    store_->end_batch();
  } catch (const Error& e) {
    // The database no longer matches what the daemon holds in memory: stopping is the only safe
    // answer (the jobs keep running; the next daemon re-reads the database and re-adopts them).
    for (const Answer& a : batch) ::close(a.fd);
    throw Error(std::string("scheduler: cannot make the state durable, stopping: ") + e.what());
  }
  for (const Answer& a : batch) {
    try {
      std::string out;
      a.resp.SerializeToString(&out);
      write_frame(a.fd, out, 5);
    } catch (const Error& e) {
      say("a client went away: ", e.what());
    }
    ::close(a.fd);
    count_request(a.kind, wall_now() - a.accepted);
  }
}

proto::Response Daemon::handle(const proto::Request& req, const Identity& who) {
  proto::Response resp;
  resp.set_ok(true);
  resp.set_policy(policy_->name());
  for (const auto& [k, v] : policy_->counters()) (*resp.mutable_policy_counters())[k] = v;
  resp.set_draining(draining_);
  resp.set_daemon_pid(::getpid());
  switch (req.body_case()) {
    case proto::Request::kSubmit:
      try {
        resp.set_job(submit(req.submit().spec(), who));
        ++counts_.admission["admitted"];
      } catch (const AdmissionDeferred&) {
        ++counts_.admission["deferred"];
        throw;
      } catch (const std::exception&) {
        ++counts_.admission["rejected"];
        throw;
      }
      resp.set_expected_start_s(last_estimate_);
      resp.set_expected_start_basis(last_basis_);
      break;
    case proto::Request::kStatus:
      status(req.status(), resp, who);
      break;
    case proto::Request::kCancel:
      cancel(req.cancel().job(), who);
      break;
    case proto::Request::kPreempt:
      preempt(req.preempt().job(), who);
      break;
    case proto::Request::kLogs:
      logs(req.logs(), resp, who);
      break;
    case proto::Request::kDrain:
      EMBER_CHECK(access_.is_admin(who), "user ", who.name,
                  " may not drain the daemon: that is for root, the daemon's user (", access_.self().name,
                  ") and the admin group");
      draining_ = true;
      resp.set_draining(true);
      if (req.drain().preempt())
        for (JobRecord* r : active_jobs())
          if (r->info.state() == proto::RUNNING) stop(*r, StopKind::kDrain, "the daemon is draining");
      say("draining", req.drain().preempt() ? ", running jobs preempted" : ": running jobs may finish");
      break;
    default:
      EMBER_FAIL("empty request: expected submit, status, cancel, preempt, logs or drain");
  }
  return resp;
}

int64_t Daemon::submit(const proto::JobSpec& spec_in, const Identity& who) {
  EMBER_CHECK(!draining_, "the daemon is draining and takes no new jobs");
  access_.check_may_submit(who);
  proto::JobSpec spec = spec_in;
  validate_spec(spec, "'" + spec.name() + "'");
  check_team(spec, "job '" + spec.name() + "'");
  if (speed_fn_ && !spec.model().empty()) {
    const auto& known = speeds_.models();
    if (std::find(known.begin(), known.end(), spec.model()) == known.end()) {
      std::string list;
      for (const std::string& m : known) list += (list.empty() ? "" : ", ") + m;
      EMBER_FAIL("job '", spec.name(), "': model '", spec.model(), "' is not in the speed table (models: ", list, ")");
    }
  }
  const int g = spec_devices(spec);
  const Topology& t = cluster_.topology();
  if (t.min_nodes(g, spec.memory_gib()) < 0) {
    double most = 0;
    for (const PoolDevice& d : pool_.devices) most = std::max(most, d.memory_gib);
    if (g > t.num_devices())
      EMBER_FAIL("job '", spec.name(), "' can never run here: it needs ", g, " devices and the pool has ",
                 t.num_devices(), " (", pool_.describe(), ")");
    EMBER_FAIL("job '", spec.name(), "' can never run here: it needs ", g, " device(s) with ", spec.memory_gib(),
               " GiB each and the largest device has ", most, " GiB (", pool_.describe(), ")");
  }
  const int queued = count_state(proto::QUEUED);
  EMBER_CHECK(queued < opt_.max_queued, "the queue is full: ", queued, " job(s) waiting, the daemon's bound is ",
              opt_.max_queued, " (--max-queued); submit again later");
  if (const int limit = access_.limits_of(who.uid).max_devices(); limit > 0)
    EMBER_CHECK(g <= limit, "job '", spec.name(), "' can never run: it needs ", g, " devices and user ", who.name,
                " may hold at most ", limit, " (max_devices in the daemon's --config)");
  if (const int limit = access_.limits_of(who.uid).max_queued(); limit > 0) {
    int mine = 0;
    for (const JobRecord* r : active_jobs())
      mine += r->info.state() == proto::QUEUED && access_.owner_of(r->info) == who.uid;
    EMBER_CHECK(mine < limit, "user ", who.name, " has ", mine, " job(s) waiting, the limit per user is ", limit,
                " (max_queued in the daemon's --config); submit again once some have started");
  }
  if (spec.workdir().empty()) spec.set_workdir(state_dir_);
  if (access_.runs_jobs_as_owners() && who.uid != access_.self().uid) check_paths_as(who, spec);
  check_runnable(spec);
  // Admission: where the policy would put the job now, and whether that meets the target.
  const double now0 = wall_now();
  Job probe;
  probe.id = std::numeric_limits<int64_t>::max();
  probe.spec = to_sched_spec(spec, std::max(now0, last_submit_));
  probe.status = JobStatus::kWaiting;
  const AdmissionAnswer verdict = admission_->decide(state(now0), probe, 0);
  if (verdict.verdict != Verdict::kAdmit)
    throw AdmissionDeferred(
        detail::concat("job '", spec.name(), "' would start in ~", format_delay(verdict.estimate.decision()),
                       ", over the daemon's start-delay target of ", format_delay(opt_.admit_target),
                       " (--admit-target); resubmit in ~", format_delay(verdict.resubmit_at - now0)));
  JobRecord r;
  *r.info.mutable_spec() = spec;
  r.info.set_owner_uid(who.uid);
  r.info.set_owner_gid(who.gid);
  r.info.set_owner(who.name);
  r.info.set_state(proto::QUEUED);
  double now = wall_now();
  // Distinct, increasing submit times keep submission order exact for the policies.
  if (now <= last_submit_) now = std::nextafter(last_submit_, kInf);
  last_submit_ = now;
  r.info.set_submit_time(now);
  r.job.spec = to_sched_spec(spec, now);
  r.job.status = JobStatus::kWaiting;
  r.job.queued_since = now;
  store_->insert(r, "submitted");
  const int64_t id = r.info.id();
  say("job ", id, " (", spec.name(), ") submitted by ", who.name, ": ", g, " device(s)");
  JobRecord& rec = jobs_.emplace(id, std::move(r)).first->second;
  track(rec);
  admission_->arrived(rec.job, now);
  estimates_[id] = {verdict.estimate.decision(), now};
  schedule();  // before answering: the caller's next status sees the decision
  last_estimate_ = rec.info.state() == proto::QUEUED ? verdict.estimate.decision() : 0.0;
  last_basis_ = last_estimate_ > 0 ? estimate_basis(verdict.estimate) : "";
  return id;
}

void Daemon::check_team(const proto::JobSpec& spec, const std::string& what) const {
  if (shares_.empty() || shares_.count(spec.queue())) return;
  std::string known;
  for (const auto& [t, n] : shares_) known += (known.empty() ? "" : ", ") + t;
  EMBER_FAIL(what, ": team '", spec.queue(), "' has no share in the quota file '", opt_.quota, "' (teams: ", known,
             "); submit with --team TEAM");
}

void Daemon::check_paths_as(const Identity& who, const proto::JobSpec& spec) {
  // Everything the job will touch is checked with the owner's own ids, by the kernel: a spec
  // must not reach, through the daemon, what its owner could not reach alone.
  const std::string search = program_search_path(spec);
  fs::path ckpt = spec.checkpoint_dir();
  if (!ckpt.empty() && ckpt.is_relative()) ckpt = fs::path(spec.workdir()) / ckpt;
  const int verdict = run_as(who, [&]() -> int {
    std::error_code ec;  // a file is named as one, as its owner sees it
    if (fs::exists(spec.workdir(), ec) && !fs::is_directory(spec.workdir(), ec)) return 4;
    if (::access(spec.workdir().c_str(), X_OK) != 0) return 1;
    if (find_program(spec.command(), spec.workdir(), search).empty()) return 2;
    if (!ckpt.empty()) {
      // The folder itself when it exists, else the nearest existing folder above it (the job
      // creates the rest, as its owner; the daemon never creates anything in a user's tree).
      fs::path p = ckpt;
      std::error_code ec;
      while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
      if (::access(p.c_str(), W_OK | X_OK) != 0) return 3;
    }
    return 0;
  });
  EMBER_CHECK(verdict >= 0, "job '", spec.name(), "': cannot check its paths as user ", who.name);
  EMBER_CHECK(verdict != 4, "job '", spec.name(), "': working directory '", spec.workdir(),
              "' is not a folder (it is a file); expected the folder the job runs in");
  EMBER_CHECK(verdict != 1, "job '", spec.name(), "': user ", who.name, " may not enter the working directory '",
              spec.workdir(), "'");
  EMBER_CHECK(verdict != 2, "job '", spec.name(), "': command '", spec.command(), "' is not a program user ", who.name,
              " may run");
  EMBER_CHECK(verdict != 3, "job '", spec.name(), "': checkpoint_dir '", spec.checkpoint_dir(), "': user ", who.name,
              " may not write there");
}

void Daemon::fill_info(const JobRecord& r, proto::JobInfo* out) const {
  *out = r.info;
  if (r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING)
    out->set_run_seconds(r.info.run_seconds() + std::max(0.0, wall_now() - r.info.last_start()));
  // Ended jobs are left out: `status --all` of a long history would read every log.
  if (r.active())
    if (auto p = progress_.read(r.info.log_path())) *out->mutable_progress() = *p;
}

void Daemon::status(const proto::StatusRequest& q, proto::Response& resp, const Identity& who) {
  if (q.teams()) {
    team_report(resp);
    return;
  }
  if (q.job() != 0) {
    auto it = jobs_.find(q.job());
    EMBER_CHECK(it != jobs_.end(), "no job ", q.job(), " (ids run from 1 to ", next_id_hint(), ")");
    proto::JobInfo* info = resp.add_jobs();
    fill_info(it->second, info);
    for (const std::string& e : store_->events(q.job())) info->add_events(e);
    if (!access_.may_act_on(who, it->second.info)) Access::redact(info);
  } else {
    auto add = [&](const JobRecord& r) {
      proto::JobInfo* info = resp.add_jobs();
      fill_info(r, info);
      if (!access_.may_act_on(who, r.info)) Access::redact(info);
    };
    if (q.all())
      for (const auto& [id, r] : jobs_) add(r);
    else
      for (const JobRecord* r : active_jobs()) add(*r);
  }
  for (size_t d = 0; d < pool_.devices.size(); ++d) {
    proto::DeviceInfo* di = resp.add_devices();
    di->set_name(pool_.devices[d].name);
    di->set_memory_gib(pool_.devices[d].memory_gib);
    for (int c : pool_.devices[d].cores) di->add_cores(c);
    di->set_job(cluster_.owner(static_cast<int>(d)));
  }
}

int64_t Daemon::next_id_hint() const {
  return jobs_.empty() ? 0 : jobs_.rbegin()->first;
}

JobRecord& Daemon::job_for(int64_t id, const Identity& who, const char* what) {
  auto it = jobs_.find(id);
  EMBER_CHECK(it != jobs_.end(), "no job ", id);
  EMBER_CHECK(access_.may_act_on(who, it->second.info), "user ", who.name, " may not ", what, " job ", id,
              ": it belongs to ", user_name(access_.owner_of(it->second.info)),
              " (only its owner and the daemon's admins may)");
  return it->second;
}

void Daemon::cancel(int64_t id, const Identity& who) {
  JobRecord& r = job_for(id, who, "cancel");
  switch (r.info.state()) {
    case proto::QUEUED:
      r.info.set_state(proto::CANCELLED);
      r.info.set_finish_time(wall_now());
      r.info.set_reason("cancelled while queued");
      r.job.status = JobStatus::kDone;
      policy_->forget(r.job.id);
      save(r, r.info.reason());
      dirty_ = true;
      break;
    case proto::RUNNING:
    case proto::STOPPING:
      stop(r, StopKind::kCancel, "cancelled");
      break;
    default:
      EMBER_FAIL("job ", id, " has already ended (", state_name(r.info.state()), ")");
  }
}

void Daemon::preempt(int64_t id, const Identity& who) {
  JobRecord& r = job_for(id, who, "preempt");
  EMBER_CHECK(r.info.state() == proto::RUNNING, "job ", id, " is ", state_name(r.info.state()),
              "; only a running job can be preempted");
  stop(r, StopKind::kPreempt, "preempted by " + who.name);
}

void Daemon::logs(const proto::LogsRequest& q, proto::Response& resp, const Identity& who) {
  const JobRecord& r = job_for(q.job(), who, "read the log of");
  *resp.add_jobs() = r.info;
  std::ifstream f(r.info.log_path(), std::ios::binary);
  if (r.info.log_path().empty() || !f) return;  // never started: no log yet
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  int64_t off = q.offset() >= 0 ? std::min(q.offset(), size) : std::max<int64_t>(0, size + q.offset());
  int64_t n = std::min<int64_t>(size - off, q.max_bytes() > 0 ? std::min<int64_t>(q.max_bytes(), 16 << 20) : 1 << 20);
  std::string buf(static_cast<size_t>(n), '\0');
  f.seekg(off);
  f.read(buf.data(), n);
  resp.set_log(buf);
  resp.set_log_offset(off);
  resp.set_log_size(size);
}

}  // namespace ember::sched::daemon_impl
