#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "core/error.h"
#include "scheduler/apply_decision.h"
#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/pool.h"
#include "scheduler/daemon/slurm.h"
#include "scheduler/daemon/store.h"
#include "scheduler/daemon/supervisor.h"
#include "scheduler/daemon/wire.h"

namespace ember::sched {
namespace daemon_impl {

namespace fs = std::filesystem;

namespace {

// Signals reach the event loop through a pipe (the self-pipe trick), so that nothing but a
// write(2) happens in a handler.
int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_stop_signal = 0;

extern "C" void on_signal(int sig) {
  int saved = errno;
  if (sig == SIGTERM || sig == SIGINT) g_stop_signal = sig;
  char c = static_cast<char>(sig);
  [[maybe_unused]] ssize_t w = ::write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

// The local pool. GPUs typed from nvidia-smi's names with no --speeds: a type the built-in table
// lacks leaves the pool untyped, said at start, rather than refusing to serve a mixed workstation
// (only gavel reads the types).
Pool local_pool(const DaemonOptions& o) {
  Pool p = make_pool(o.devices, o.cpu_memory_gib);
  if (p.cpu() || !p.typed() || !o.speeds.empty()) return p;
  const SpeedTable table = SpeedTable::defaults();
  const std::vector<std::string>& known = table.types();
  for (const PoolDevice& d : p.devices)
    if (std::find(known.begin(), known.end(), d.type) == known.end()) {
      p.note = "GPU type '" + d.type + "' is not in the built-in speed table; the GPUs are scheduled as one type " +
               "(give --speeds FILE with a column per type to use them)";
      for (PoolDevice& e : p.devices) e.type.clear();
      break;
    }
  return p;
}

}  // namespace

Daemon::Daemon(const DaemonOptions& o)
    : opt_(o),
      access_(read_daemon_config(o.config), self_identity(), o.config),
      pool_(o.backend == "slurm" ? slurm_pool(o.partition) : local_pool(o)),
      cluster_(pool_.topology()) {
  EMBER_CHECK(o.backend == "local" || o.backend == "slurm", "--backend: expected local or slurm, got '", o.backend,
              "'");
  EMBER_CHECK(o.grace_s >= 0, "--grace: expected seconds >= 0, got ", o.grace_s);
  EMBER_CHECK(o.max_queued >= 1, "--max-queued: expected at least 1, got ", o.max_queued);
  policy_ = make_policy(o.policy, o.params);
  EMBER_CHECK(o.speeds.empty() || pool_.typed(),
              "--speeds: the pool has one device type; give types with --devices "
              "cpu:N@TYPE,... (GPUs are typed when nvidia-smi lists several kinds)");
  if (pool_.typed()) {
    speeds_ = o.speeds.empty() ? SpeedTable::defaults() : SpeedTable::read(o.speeds);
    speeds_.check_types(cluster_.topology());
    speed_fn_ = speeds_on(cluster_.topology());
  }
  if (!o.quota.empty()) {
    shares_ = read_shares(o.quota, cluster_.num_devices());
    policy_ = make_team_quotas(std::move(policy_), shares_, quota_options(o.params));
  }
  // A submission over the target is refused with the time to resubmit (a defer the client acts on).
  admission_ = std::make_unique<AdmissionControl>(
      AdmissionOptions{.target = o.admit_target >= 0 ? o.admit_target : kInf, .max_defers = 1, .use_estimates = true},
      policy_.get());
  // Everything the daemon creates is its own alone (the database holds every user's commands
  // and environments); the folders users must reach are opened up explicitly below. Jobs get the
  // umask the daemon was started with.
  job_umask_ = ::umask(077);
  {
    std::error_code ec;
    fs::create_directories(fs::path(o.state_dir) / "jobs", ec);
    EMBER_CHECK(!ec && fs::is_directory(fs::path(o.state_dir) / "jobs"), "--state ", o.state_dir,
                ": expected a folder the daemon can create and write (its jobs/ subfolder could not be made: ",
                ec ? ec.message() : std::string("it is not a folder"), ")");
  }
  state_dir_ = fs::absolute(o.state_dir).string();
  secure_state_dir();
  lock_fd_ = ::open((fs::path(state_dir_) / "daemon.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  EMBER_CHECK(lock_fd_ >= 0, "scheduler: cannot open ", state_dir_, "/daemon.lock: ", std::strerror(errno));
  EMBER_CHECK(::flock(lock_fd_, LOCK_EX | LOCK_NB) == 0, "scheduler: another daemon already owns ", state_dir_);
  store_ = std::make_unique<Store>((fs::path(state_dir_) / "state.db").string());
}

void Daemon::secure_state_dir() {
  struct stat st {};
  EMBER_CHECK(::stat(state_dir_.c_str(), &st) == 0, "--state ", state_dir_, ": ", std::strerror(errno));
  // Whoever owns the folder could swap the database or the socket under the daemon.
  EMBER_CHECK(st.st_uid == access_.self().uid, "--state ", state_dir_, ": the folder belongs to ", user_name(st.st_uid),
              ", expected the daemon's own user (", access_.self().name,
              "): its owner could replace the daemon's database and socket");
  const std::string jobs = (fs::path(state_dir_) / "jobs").string();
  EMBER_CHECK(::chown(state_dir_.c_str(), static_cast<uid_t>(-1), access_.users_gid()) == 0, "--state ", state_dir_,
              ": cannot give the folder to the users' group (gid ", access_.users_gid(), "): ", std::strerror(errno),
              " (the daemon's user must be a member of users_group)");
  EMBER_CHECK(::chmod(state_dir_.c_str(), 0770) == 0 && ::chmod(jobs.c_str(), 0700) == 0, "--state ", state_dir_,
              ": cannot set its permissions: ", std::strerror(errno));
}

int Daemon::run() {
  // First, so that a port in use stops the daemon before it changes anything.
  if (!opt_.http.empty())
    web_ = std::make_unique<WebEndpoint>(opt_.http, opt_.http_allow_remote,
                                         [this](const std::string& line) { say(line); });
  recover();
  listen_fd_ = listen_unix(socket_path(state_dir_));
  // Users reach the daemon through its socket only: group members may connect, no one else.
  const std::string sock = socket_path(state_dir_);
  EMBER_CHECK(
      ::chown(sock.c_str(), static_cast<uid_t>(-1), access_.users_gid()) == 0 && ::chmod(sock.c_str(), 0660) == 0,
      "scheduler: cannot give the socket ", sock, " to group ", access_.users_gid(),
      " (mode 0660): ", std::strerror(errno));
  EMBER_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, "scheduler: pipe: ", std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGCHLD, SIGTERM, SIGINT}) ::sigaction(s, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  if (!pool_.note.empty()) say(pool_.note);
  say("serving ", pool_.describe(), " with policy ", policy_->name(), " at ", socket_path(state_dir_));
  // Said even under --quiet: with port 0 it is the only way to learn where the endpoint listens.
  if (web_ && opt_.quiet) std::cout << "metrics and dashboard at " << web_->url() << std::endl;
  if (web_) say("metrics and dashboard at ", web_->url());
  dirty_ = true;
  for (;;) {
    reap();
    poll_adopted();
    if (slurm()) poll_slurm();
    enforce_grace();
    if (wall_now() >= wakeup_) dirty_ = true;
    if (dirty_) schedule();
    if (web_) publish_snapshot();
    if (g_stop_signal) {
      say("stopped by signal ", static_cast<int>(g_stop_signal), "; running jobs keep running for the next daemon");
      break;
    }
    if (draining_ && count_state(proto::RUNNING) + count_state(proto::STOPPING) == 0) {
      say("drained: no job running, ", count_state(proto::QUEUED), " queued job(s) kept for the next daemon");
      break;
    }
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {g_signal_pipe[0], POLLIN, 0}};
    int r = ::poll(fds, 2, timeout_ms());
    if (r < 0 && errno != EINTR) EMBER_FAIL("scheduler: poll: ", std::strerror(errno));
    if (r > 0 && (fds[1].revents & POLLIN)) {
      char buf[64];
      while (::read(g_signal_pipe[0], buf, sizeof(buf)) > 0) {
      }
    }
    if (r > 0 && (fds[0].revents & POLLIN)) accept_all();
  }
  ::close(listen_fd_);
  ::unlink(socket_path(state_dir_).c_str());
  return 0;
}

void Daemon::save(JobRecord& r, const std::string& what) {
  store_->save(r, what);
  const bool ends = !r.active() && active_.count(r.info.id());
  track(r);
  if (ends) count_end(r);
  if (!what.empty()) say("job ", r.info.id(), " (", r.info.spec().name(), ") ", state_name(r.info.state()), ": ", what);
}

std::map<uid_t, int> Daemon::devices_by_owner() const {
  std::map<uid_t, int> held;
  for (const JobRecord* r : active_jobs())
    if (r->info.state() == proto::RUNNING || r->info.state() == proto::STOPPING)
      held[access_.owner_of(r->info)] += static_cast<int>(r->job.devices.size());
  return held;
}

bool Daemon::over_device_limit(const JobRecord& r, const std::map<uid_t, int>& held) const {
  const uid_t owner = access_.owner_of(r.info);
  const int limit = access_.limits_of(owner).max_devices();
  if (limit <= 0) return false;
  auto it = held.find(owner);
  return (it == held.end() ? 0 : it->second) + r.job.spec.gpus > limit;
}

SchedState Daemon::state(double now) {
  waiting_.clear();
  running_.clear();
  const std::map<uid_t, int> held = devices_by_owner();
  for (JobRecord* rp : active_jobs()) {
    JobRecord& r = *rp;
    Job& j = r.job;
    j.executed = r.info.run_seconds();  // before the current run: Job adds the run since last_start
    j.overhead = r.info.lost_seconds();
    if (r.info.state() == proto::QUEUED) {
      j.status = JobStatus::kWaiting;
      // A job whose owner is at their device limit waits outside the policy's view: no policy
      // could start it, and one that tried would hold devices for nothing.
      if (!over_device_limit(r, held)) waiting_.push_back(&j);
    } else if (r.info.state() == proto::RUNNING) {
      j.status = JobStatus::kRunning;
      j.last_start = r.info.last_start();
      running_.push_back(&j);
    }
    // STOPPING jobs are in neither list: their devices stay taken until they exit.
  }
  std::stable_sort(waiting_.begin(), waiting_.end(), [](const Job* a, const Job* b) {
    return a->spec.submit != b->spec.submit ? a->spec.submit < b->spec.submit : a->id < b->id;
  });
  SchedState s;
  s.now = now;
  s.cluster = &cluster_;
  s.waiting = waiting_;
  s.running = running_;
  s.preempt_cost = opt_.preempt_cost;
  s.speed = speed_fn_ ? &speed_fn_ : nullptr;
  return s;
}

void Daemon::schedule() {
  dirty_ = false;
  wakeup_ = kInf;
  if (draining_) return;
  try {
    decide_and_apply();
  } catch (const Error& e) {
    say("error: ", e.what(), "; deciding again in 1 s");
    wakeup_ = wall_now() + 1;
  }
}

// The daemon's side of apply_decision(): its job records, its device limits, its launches.
class DaemonTarget : public DecisionTarget {
 public:
  explicit DaemonTarget(Daemon& d) : d_(d), held_(d.devices_by_owner()) {}
  bool running(JobId id) const override { return state_is(id, proto::RUNNING); }
  bool waiting(JobId id) const override { return state_is(id, proto::QUEUED); }
  bool stopping(JobId id) const override { return state_is(id, proto::STOPPING); }
  bool any_stopping() const override { return d_.count_state(proto::STOPPING) > 0; }
  const Job& job(JobId id) const override { return d_.jobs_.at(id).job; }
  const Cluster& cluster() const override { return d_.cluster_; }
  // Two starts in one decision may together pass their owner's limit: the later one waits.
  bool may_start(JobId id) override { return !d_.over_device_limit(d_.jobs_.at(id), held_); }
  void preempt(JobId id) override {
    d_.stop(d_.jobs_.at(id), StopKind::kPreempt, "preempted by policy " + d_.policy_->name());
  }
  void start(JobId id, const Placement& p) override {
    JobRecord& r = d_.jobs_.at(id);
    // A placement that does not fit the free devices is the policy's mistake, not the job's: the
    // job stays queued for the next decision (the simulator, a test bed, stops the run instead).
    if (!placement_problem(d_.cluster_.free(), p, r.job.spec.gpus, r.job.spec.mem_per_gpu).empty()) return;
    held_[d_.access_.owner_of(r.info)] += r.job.spec.gpus;
    try {
      d_.launch(r, p);
    } catch (const Error& e) {
      if (!r.job.devices.empty()) d_.cluster_.release(r.job);
      r.job.devices.clear();
      r.info.clear_devices();
      r.info.set_state(proto::FAILED);
      r.info.set_finish_time(wall_now());
      r.info.set_reason(std::string("could not start: ") + e.what());
      r.job.status = JobStatus::kDone;
      d_.save(r, r.info.reason());
    }
  }

 private:
  bool state_is(JobId id, proto::JobState s) const {
    auto it = d_.jobs_.find(id);
    return it != d_.jobs_.end() && it->second.info.state() == s;
  }
  Daemon& d_;
  std::map<uid_t, int> held_;
};

void Daemon::decide_and_apply() {
  elastic_pass(wall_now());
  Decision d = policy_->decide(state(wall_now()));
  DaemonTarget target(*this);
  apply_decision(d, policy_->name(), target);
  const double after = wall_now();
  wakeup_ = policy_->next_wakeup(state(after));
  // A wake-up that is already due must not spin the loop: decide again shortly instead.
  if (wakeup_ < kInf) wakeup_ = std::max(wakeup_, after + 0.05);
  // Running elastic jobs report as they go: their sizes are looked at again every second.
  if (elastic_running()) wakeup_ = std::min(wakeup_, after + 1.0);
}

int Daemon::timeout_ms() const {
  double now = wall_now(), t = 60;  // an idle daemon still wakes now and then
  if (wakeup_ < kInf) t = std::min(t, wakeup_ - now);
  for (const JobRecord* r : active_jobs()) {
    if (r->info.state() == proto::STOPPING && !r->killed) t = std::min(t, r->stop_time + opt_.grace_s - now);
    if (r->adopted) t = std::min(t, 0.1);  // adopted supervisors send no SIGCHLD
    // Slurm tells nobody when a job ends: the daemon asks.
    if (slurm() && (r->info.state() == proto::RUNNING || r->info.state() == proto::STOPPING))
      t = std::min(t, std::max(0.0, next_slurm_poll_ - now));
  }
  if (dirty_) t = 0;
  return static_cast<int>(std::ceil(std::max(0.0, t) * 1000));
}

}  // namespace daemon_impl

int serve(const DaemonOptions& opt) {
  EMBER_CHECK(!opt.state_dir.empty(), "--state: expected a folder for the daemon's socket, database and logs");
  daemon_impl::Daemon d(opt);
  return d.run();
}

}  // namespace ember::sched
