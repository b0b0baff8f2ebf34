// What clients ask over the socket: submit (with admission control), status, cancel, logs,
// drain.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/supervisor.h"
#include "scheduler/daemon/wire.h"

namespace ember::sched::daemon_impl {

namespace fs = std::filesystem;

void Daemon::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    proto::Response resp;
    try {
      proto::Request req;
      EMBER_CHECK(req.ParseFromString(read_frame(fd, 5)), "the request does not parse");
      resp = handle(req);
    } catch (const std::exception& e) {
      resp.Clear();
      resp.set_ok(false);
      resp.set_error(e.what());
    }
    try {
      std::string out;
      resp.SerializeToString(&out);
      write_frame(fd, out, 5);
    } catch (const Error& e) {
      say("a client went away: ", e.what());
    }
    ::close(fd);
  }
}

proto::Response Daemon::handle(const proto::Request& req) {
  proto::Response resp;
  resp.set_ok(true);
  resp.set_policy(policy_->name());
  resp.set_draining(draining_);
  resp.set_daemon_pid(::getpid());
  switch (req.body_case()) {
    case proto::Request::kSubmit:
      resp.set_job(submit(req.submit().spec()));
      break;
    case proto::Request::kStatus:
      status(req.status(), resp);
      break;
    case proto::Request::kCancel:
      cancel(req.cancel().job());
      break;
    case proto::Request::kLogs:
      logs(req.logs(), resp);
      break;
    case proto::Request::kDrain:
      draining_ = true;
      resp.set_draining(true);
      if (req.drain().preempt())
        for (auto& [id, r] : jobs_)
          if (r.info.state() == proto::RUNNING) stop(r, StopKind::kDrain, "the daemon is draining");
      say("draining", req.drain().preempt() ? ", running jobs preempted" : ": running jobs may finish");
      break;
    default:
      EMBER_FAIL("empty request: expected submit, status, cancel, logs or drain");
  }
  return resp;
}

int64_t Daemon::submit(const proto::JobSpec& spec_in) {
  EMBER_CHECK(!draining_, "the daemon is draining and takes no new jobs");
  proto::JobSpec spec = spec_in;
  validate_spec(spec, "'" + spec.name() + "'");
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
  if (spec.workdir().empty()) spec.set_workdir(state_dir_);
  EMBER_CHECK(fs::is_directory(spec.workdir()), "job '", spec.name(), "': working directory '", spec.workdir(),
              "' does not exist");
  const char* path = std::getenv("PATH");
  auto env_path = spec.env().find("PATH");
  std::string search = env_path != spec.env().end() ? env_path->second : (path ? path : "/usr/bin:/bin");
  EMBER_CHECK(
      !find_program(spec.command(), spec.workdir(), search).empty(), "job '", spec.name(), "': command '",
      spec.command(), "' is not an executable file",
      spec.command().find('/') == std::string::npos ? " on the PATH" : (" (relative to " + spec.workdir() + ")"));
  JobRecord r;
  *r.info.mutable_spec() = spec;
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
  say("job ", id, " (", spec.name(), ") submitted: ", g, " device(s)");
  jobs_.emplace(id, std::move(r));
  schedule();  // before answering: the caller's next status sees the decision
  return id;
}

void Daemon::fill_info(const JobRecord& r, proto::JobInfo* out) const {
  *out = r.info;
  if (r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING)
    out->set_run_seconds(r.info.run_seconds() + std::max(0.0, wall_now() - r.info.last_start()));
}

void Daemon::status(const proto::StatusRequest& q, proto::Response& resp) {
  if (q.job() != 0) {
    auto it = jobs_.find(q.job());
    EMBER_CHECK(it != jobs_.end(), "no job ", q.job(), " (ids run from 1 to ", next_id_hint(), ")");
    proto::JobInfo* info = resp.add_jobs();
    fill_info(it->second, info);
    for (const std::string& e : store_->events(q.job())) info->add_events(e);
  } else {
    for (const auto& [id, r] : jobs_)
      if (q.all() || r.active()) fill_info(r, resp.add_jobs());
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

void Daemon::cancel(int64_t id) {
  auto it = jobs_.find(id);
  EMBER_CHECK(it != jobs_.end(), "no job ", id);
  JobRecord& r = it->second;
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

void Daemon::logs(const proto::LogsRequest& q, proto::Response& resp) {
  auto it = jobs_.find(q.job());
  EMBER_CHECK(it != jobs_.end(), "no job ", q.job());
  const JobRecord& r = it->second;
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
