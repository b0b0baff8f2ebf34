// Jobs' lives: recovery after a restart (re-adoption), reaping exits, the grace period,
// what an exit means (done, requeued, restarted, failed), stopping and starting a run.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/supervisor.h"
#include "scheduler/daemon/wire.h"

namespace ember::sched::daemon_impl {

namespace fs = std::filesystem;

void Daemon::recover() {
  for (JobRecord& r : store_->load_all()) {
    r.job.id = r.info.id();
    r.job.spec = to_sched_spec(r.info.spec(), r.info.submit_time());
    int64_t id = r.info.id();
    last_submit_ = std::max(last_submit_, r.info.submit_time());
    auto [it, ok] = jobs_.emplace(id, std::move(r));
    JobRecord& j = it->second;
    // A queued or running job of a team the quota file no longer has: the daemon cannot place it
    // in any share, and guessing one would change what its owner was promised.
    const proto::JobState st = j.info.state();
    if (st == proto::QUEUED || st == proto::RUNNING || st == proto::STOPPING)
      check_team(j.info.spec(), detail::concat("job ", id, " (", j.info.spec().name(), ") in ", state_dir_));
    track(j);
    counts_.preemptions[j.info.spec().queue()] += j.info.preemptions();
    if (!j.active()) count_end(j);
    if (j.info.state() == proto::QUEUED) {
      j.job.status = JobStatus::kWaiting;
    } else if (j.info.state() == proto::RUNNING || j.info.state() == proto::STOPPING) {
      readopt(j);
    } else {
      j.job.status = JobStatus::kDone;
    }
  }
  relearn();
}

// What the policy and admission control learned from finished jobs lives in this process only:
// without telling them the finished jobs again, every restart would send gittins and the learned
// policy back to ranking by attained service alone until new jobs finish. Told in the order the
// jobs finished, as they were the first time.
void Daemon::relearn() {
  std::vector<JobRecord*> done;
  for (auto& [id, r] : jobs_)
    if (r.info.state() == proto::DONE) done.push_back(&r);
  std::stable_sort(done.begin(), done.end(), [](const JobRecord* a, const JobRecord* b) {
    return a->info.finish_time() < b->info.finish_time();
  });
  for (JobRecord* r : done) {
    learn_from(*r);
    policy_->forget(r->job.id);
    admission_->forget(r->job.id);
  }
}

void Daemon::learn_from(JobRecord& r) {
  r.job.executed = r.info.run_seconds();
  r.job.overhead = r.info.lost_seconds();
  r.job.finish = r.info.finish_time();
  policy_->job_finished(r.job);
  admission_->finished(r.job, std::max(0.0, r.info.run_seconds() - r.info.lost_seconds()), r.job.finish);
}

void Daemon::readopt(JobRecord& j) {
  if (slurm()) {
    readopt_from_slurm(j);
    return;
  }
  pid_t pid = static_cast<pid_t>(j.info.pid());
  if (pid <= 0)  // died between fork and the first save: the supervisor wrote its pid file
    if (auto p = read_pid_file(pid_path(j))) pid = *p;
  uint64_t start = j.pid_start;
  bool alive = pid > 0 && process_alive(pid, start);
  std::vector<int> devs(j.info.devices().begin(), j.info.devices().end());
  j.job.devices = devs;
  j.job.status = JobStatus::kRunning;
  j.job.last_start = j.info.last_start();
  if (alive) {
    try {
      cluster_.allocate_exact(j.job, devs);
    } catch (const Error& e) {
      // The pool changed under it (other --devices): stop it; it resumes on the new pool.
      say("job ", j.info.id(), ": ", e.what(), "; stopping it");
      j.job.devices.clear();
      j.info.set_pid(pid);
      j.pid_start = process_start_time(pid);
      j.adopted = true;
      stop(j, StopKind::kPreempt, "the device pool changed");
      return;
    }
    j.info.set_pid(pid);
    if (!j.pid_start) j.pid_start = process_start_time(pid);
    j.adopted = true;
    save(j, detail::concat("re-adopted after a daemon restart (pid ", pid, ")"));
    // The SIGTERM of a stop may have died with the last daemon (it is sent after the stop is
    // recorded); a second one is harmless to a job already stopping.
    if (j.info.state() == proto::STOPPING && !j.killed) signal_run(j, SIGTERM);
    return;
  }
  // Gone while no daemon watched: its exit file says how it ended; without one (the machine
  // rebooted, or the group was SIGKILLed) it is requeued to resume from its checkpoint.
  bool held = true;
  try {
    cluster_.allocate_exact(j.job, devs);
  } catch (const Error&) {
    held = false;
  }
  if (!held) j.job.devices.clear();
  std::optional<int> code = read_exit_file(exit_path(j));
  finish_run(j, code, "ended while the daemon was down");
}

void Daemon::reap() {
  for (;;) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    for (JobRecord* rp : active_jobs()) {
      JobRecord& r = *rp;
      if (r.adopted || r.info.pid() != pid || !(r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING))
        continue;
      // The exit file has the job's own status; the supervisor's status is the fallback (it
      // was SIGKILLed with its job).
      std::optional<int> code = read_exit_file(exit_path(r));
      if (!code) code = exit_code_of(st);
      finish_run(r, code, "");
      break;
    }
  }
}

void Daemon::poll_adopted() {
  for (JobRecord* rp : active_jobs()) {
    JobRecord& r = *rp;
    if (!r.adopted || !(r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING)) continue;
    if (process_alive(static_cast<pid_t>(r.info.pid()), r.pid_start)) continue;
    std::optional<int> code = read_exit_file(exit_path(r));
    if (!code && r.killed) code = 128 + SIGKILL;
    finish_run(r, code, "");
  }
}

void Daemon::enforce_grace() {
  double now = wall_now();
  for (JobRecord* rp : active_jobs()) {
    JobRecord& r = *rp;
    if (r.info.state() != proto::STOPPING || r.killed || now < r.stop_time + opt_.grace_s) continue;
    signal_run(r, SIGKILL);
    r.killed = true;
    save(r, detail::concat("no exit ", opt_.grace_s, " s after SIGTERM: SIGKILL"));
  }
}

void Daemon::finish_run(JobRecord& r, std::optional<int> code, const std::string& note) {
  const double now = wall_now();
  if (!r.job.devices.empty()) cluster_.release(r.job);
  r.job.devices.clear();
  r.info.clear_devices();
  r.info.clear_device_names();
  r.info.set_run_seconds(r.info.run_seconds() + std::max(0.0, now - r.info.last_start()));
  r.job.executed = r.info.run_seconds();
  r.info.set_pid(0);
  r.pid_start = 0;
  r.adopted = false;
  const StopKind stop = r.stop;
  r.stop = StopKind::kNone;
  r.killed = false;
  r.info.set_exit_code(code.value_or(-1));
  std::string how = code ? (*code > 128 && *code < 160 ? detail::concat("killed by signal ", *code - 128)
                                                       : detail::concat("exit ", *code))
                         : std::string("ended, status unknown");
  if (!note.empty()) how += " (" + note + ")";
  const int max_restarts = r.info.spec().has_max_restarts() ? r.info.spec().max_restarts() : 0;
  if (stop == StopKind::kCancel) {
    r.info.set_state(proto::CANCELLED);
    r.info.set_finish_time(now);
    r.info.set_reason("cancelled; " + how);
  } else if (code && *code == 0) {
    r.info.set_state(proto::DONE);
    r.info.set_finish_time(now);
    r.info.set_reason(how);
  } else if ((code && *code == kPreemptedExitCode) || stop != StopKind::kNone || !code) {
    // Preempted (asked or not), or lost with the daemon: back to the queue, to resume from
    // its checkpoint on whatever devices come next. Not a failure, so no restart is used.
    r.info.set_state(proto::QUEUED);
    // The work since the job's last checkpoint is lost, by its spec's interval: still to do.
    r.info.set_lost_seconds(
        r.info.lost_seconds() +
        work_lost_to_preemption(r.info.run_seconds() - r.info.lost_seconds(), r.info.spec().checkpoint_interval_s()));
    r.info.set_preemptions(r.info.preemptions() + 1);
    ++counts_.preemptions[r.info.spec().queue()];
    r.job.preemptions = r.info.preemptions();
    r.job.queued_since = now;
    r.info.set_reason("preempted; " + how);
  } else if (r.info.restarts() < max_restarts) {
    r.info.set_state(proto::QUEUED);
    r.info.set_restarts(r.info.restarts() + 1);
    r.job.queued_since = now;
    r.info.set_reason(detail::concat("failed (", how, "); restart ", r.info.restarts(), " of ", max_restarts));
  } else {
    r.info.set_state(proto::FAILED);
    r.info.set_finish_time(now);
    r.info.set_reason(detail::concat("failed (", how, ")", max_restarts ? "; no restarts left" : ""));
  }
  r.job.status = r.info.state() == proto::QUEUED ? JobStatus::kWaiting : JobStatus::kDone;
  if (r.info.state() == proto::DONE) learn_from(r);
  if (r.job.status == JobStatus::kDone) {
    elastic_.erase(r.job.id);
    policy_->forget(r.job.id);
    admission_->forget(r.job.id);
    estimates_.erase(r.job.id);
  }
  save(r, r.info.reason());
  dirty_ = true;
}

void Daemon::stop(JobRecord& r, StopKind kind, const std::string& why) {
  if (r.info.state() == proto::STOPPING) {
    if (kind == StopKind::kCancel && r.stop != StopKind::kCancel) {
      r.stop = kind;
      save(r, "cancel requested while stopping");
    }
    return;
  }
  r.stop = kind;
  r.stop_time = wall_now();
  r.killed = false;
  r.info.set_state(proto::STOPPING);
  r.info.set_reason(why);
  // Durable before the signal, even inside a batch of requests: a daemon that died between the
  // two would find a job that exited 143 with no stop on record, and count its preemption as a
  // failure (DaemonCrashTest caught exactly that). Dying after the save but before the signal is
  // covered by readopt(), which signals a re-adopted stopping job again.
  save(r, "SIGTERM: " + why);
  store_->flush();
  signal_run(r, SIGTERM);
}

namespace {

// Opens the job's log, the owner's file (mode 0600) in the daemon's private jobs/ folder, and
// writes `head` to it.
void write_log_head(const Launch& l, const std::string& head) {
  int fd = ::open(l.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  EMBER_CHECK(fd >= 0, "cannot open the log ", l.log_path, ": ", std::strerror(errno));
  if (l.run_as && ::fchown(fd, l.run_as->uid, l.run_as->gid) != 0) {
    int e = errno;
    ::close(fd);
    EMBER_FAIL("cannot give the log ", l.log_path, " to user ", l.run_as->name, ": ", std::strerror(e));
  }
  [[maybe_unused]] ssize_t w = ::write(fd, head.data(), head.size());
  ::close(fd);
}

}  // namespace

void Daemon::launch(JobRecord& r, const Placement& p) {
  const double now = wall_now();
  r.job.devices = cluster_.allocate(r.job, p);
  r.info.set_attempts(r.info.attempts() + 1);
  r.info.set_state(proto::RUNNING);
  r.info.set_last_start(now);
  if (r.info.first_start() == 0) r.info.set_first_start(now);
  r.job.last_start = now;
  if (r.job.first_start < 0) r.job.first_start = now;
  count_start(r, now);
  if (auto it = estimates_.find(r.job.id); it != estimates_.end()) {
    admission_->started(it->second.first, now - it->second.second);
    estimates_.erase(it);
  }
  r.job.status = JobStatus::kRunning;
  r.info.clear_devices();
  r.info.clear_device_names();
  std::string names, cuda;
  int threads = 0;
  std::vector<int> cores;
  for (int d : r.job.devices) {
    const PoolDevice& dev = pool_.devices[d];
    r.info.add_devices(d);
    r.info.add_device_names(dev.name);
    names += (names.empty() ? "" : ",") + dev.name;
    if (dev.cuda_index >= 0) cuda += (cuda.empty() ? "" : ",") + std::to_string(dev.cuda_index);
    for (int c : dev.cores)
      if (std::find(cores.begin(), cores.end(), c) == cores.end()) cores.push_back(c);
    threads += static_cast<int>(dev.cores.size());
  }
  fs::create_directories(job_dir(r.info.id()));
  r.info.set_log_path(job_dir(r.info.id()) + "/output.log");
  r.info.set_pid(0);
  r.pid_start = 0;
  // Durable before the fork (even inside a batch of requests): a daemon that dies after the fork
  // must find the job running, not queued, or the next daemon would start it a second time.
  save(r, "starting attempt " + std::to_string(r.info.attempts()) + " on " + names);
  store_->flush();

  Launch l;
  l.command = r.info.spec().command();
  l.args.assign(r.info.spec().args().begin(), r.info.spec().args().end());
  l.workdir = r.info.spec().workdir();
  l.log_path = r.info.log_path();
  l.exit_path = exit_path(r);
  l.pid_path = pid_path(r);
  ::unlink(l.exit_path.c_str());
  for (const auto& [k, v] : r.info.spec().env()) l.env[k] = v;
  l.env["EMBER_DEVICES"] = names;
  l.env["CUDA_VISIBLE_DEVICES"] = cuda;       // empty on CPU devices: the job sees no GPU
  l.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";  // the order nvidia-smi numbers them in
  l.env["EMBER_JOB_ID"] = std::to_string(r.info.id());
  l.env["EMBER_JOB_ATTEMPT"] = std::to_string(r.info.attempts());
  if (!r.info.spec().checkpoint_dir().empty()) l.env["EMBER_CHECKPOINT_DIR"] = r.info.spec().checkpoint_dir();
  if (pool_.cpu()) {
    l.cores = cores;
    l.env["OMP_NUM_THREADS"] = std::to_string(std::max(1, threads));
    l.env["OPENBLAS_NUM_THREADS"] = std::to_string(std::max(1, threads));
  }
  elastic_launch_env(r, l);
  l.umask = job_umask_;
  uid_t owner = access_.owner_of(r.info);
  if (access_.runs_jobs_as_owners() && owner != access_.self().uid) {
    l.run_as = user_identity(owner);  // throws when the user is gone: the job fails to start
    l.env["USER"] = l.env["LOGNAME"] = l.run_as->name;
    l.env["HOME"] = l.run_as->home;
  }
  write_log_head(
      l, detail::concat("=== ember sched: job ", r.info.id(), " attempt ", r.info.attempts(), " on ", names, " ===\n"));
  if (slurm()) {
    launch_on_slurm(r, names, l);
    return;
  }
  pid_t pid = spawn_supervised(l);
  r.info.set_pid(pid);
  r.pid_start = process_start_time(pid);
  save(r, "");
}

}  // namespace ember::sched::daemon_impl
