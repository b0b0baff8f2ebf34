#include "scheduler/daemon/daemon.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
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

#include "core/error.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/pool.h"
#include "scheduler/daemon/store.h"
#include "scheduler/daemon/supervisor.h"
#include "scheduler/daemon/wire.h"

namespace ember::sched {
namespace {

namespace fs = std::filesystem;

double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

class Daemon {
 public:
  explicit Daemon(const DaemonOptions& o)
      : opt_(o), pool_(make_pool(o.devices, o.cpu_memory_gib)), cluster_(pool_.topology()) {
    EMBER_CHECK(o.grace_s >= 0, "--grace: expected seconds >= 0, got ", o.grace_s);
    EMBER_CHECK(o.max_queued >= 1, "--max-queued: expected at least 1, got ", o.max_queued);
    policy_ = make_policy(o.policy, o.params);
    fs::create_directories(fs::path(o.state_dir) / "jobs");
    state_dir_ = fs::absolute(o.state_dir).string();
    lock_fd_ = ::open((fs::path(state_dir_) / "daemon.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EMBER_CHECK(lock_fd_ >= 0, "scheduler: cannot open ", state_dir_, "/daemon.lock: ", std::strerror(errno));
    EMBER_CHECK(::flock(lock_fd_, LOCK_EX | LOCK_NB) == 0, "scheduler: another daemon already owns ", state_dir_);
    store_ = std::make_unique<Store>((fs::path(state_dir_) / "state.db").string());
  }

  int run() {
    recover();
    listen_fd_ = listen_unix(socket_path(state_dir_));
    EMBER_CHECK(::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) == 0, "scheduler: pipe: ", std::strerror(errno));
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int s : {SIGCHLD, SIGTERM, SIGINT}) ::sigaction(s, &sa, nullptr);
    ::signal(SIGPIPE, SIG_IGN);
    say("serving ", pool_.describe(), " with policy ", policy_->name(), " at ", socket_path(state_dir_));
    dirty_ = true;
    for (;;) {
      reap();
      poll_adopted();
      enforce_grace();
      if (wall_now() >= wakeup_) dirty_ = true;
      if (dirty_) schedule();
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

 private:
  template <typename... A>
  void say(const A&... a) {
    if (opt_.quiet) return;
    std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%H:%M:%S", std::localtime(&t));
    std::cout << "[" << buf << "] " << detail::concat(a...) << std::endl;
  }

  std::string job_dir(int64_t id) const { return (fs::path(state_dir_) / "jobs" / std::to_string(id)).string(); }
  std::string exit_path(const JobRecord& r) const {
    return job_dir(r.info.id()) + "/exit-" + std::to_string(r.info.attempts());
  }
  std::string pid_path(const JobRecord& r) const {
    return job_dir(r.info.id()) + "/pid-" + std::to_string(r.info.attempts());
  }

  int count_state(proto::JobState s) const {
    int n = 0;
    for (const auto& [id, r] : jobs_) n += r.info.state() == s;
    return n;
  }

  void save(JobRecord& r, const std::string& what) {
    store_->save(r, what);
    if (!what.empty())
      say("job ", r.info.id(), " (", r.info.spec().name(), ") ", state_name(r.info.state()), ": ", what);
  }

  // ---------------------------------------------------------------- recovery

  void recover() {
    for (JobRecord& r : store_->load_all()) {
      r.job.id = r.info.id();
      r.job.spec = to_sched_spec(r.info.spec(), r.info.submit_time());
      int64_t id = r.info.id();
      last_submit_ = std::max(last_submit_, r.info.submit_time());
      auto [it, ok] = jobs_.emplace(id, std::move(r));
      JobRecord& j = it->second;
      if (j.info.state() == proto::QUEUED) {
        j.job.status = JobStatus::kWaiting;
      } else if (j.info.state() == proto::RUNNING || j.info.state() == proto::STOPPING) {
        readopt(j);
      } else {
        j.job.status = JobStatus::kDone;
      }
    }
  }

  void readopt(JobRecord& j) {
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

  // ---------------------------------------------------------------- running jobs

  void reap() {
    for (;;) {
      int st = 0;
      pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid <= 0) return;
      for (auto& [id, r] : jobs_) {
        if (r.adopted || r.info.pid() != pid ||
            !(r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING))
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

  void poll_adopted() {
    for (auto& [id, r] : jobs_) {
      if (!r.adopted || !(r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING)) continue;
      if (process_alive(static_cast<pid_t>(r.info.pid()), r.pid_start)) continue;
      std::optional<int> code = read_exit_file(exit_path(r));
      if (!code && r.killed) code = 128 + SIGKILL;
      finish_run(r, code, "");
    }
  }

  void enforce_grace() {
    double now = wall_now();
    for (auto& [id, r] : jobs_) {
      if (r.info.state() != proto::STOPPING || r.killed || now < r.stop_time + opt_.grace_s) continue;
      signal_group(static_cast<pid_t>(r.info.pid()), SIGKILL);
      r.killed = true;
      save(r, detail::concat("no exit ", opt_.grace_s, " s after SIGTERM: SIGKILL"));
    }
  }

  // A run ended with `code` (nullopt: unknown). Frees the devices and decides what comes next.
  void finish_run(JobRecord& r, std::optional<int> code, const std::string& note) {
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
      r.info.set_preemptions(r.info.preemptions() + 1);
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
    if (r.job.status == JobStatus::kDone) policy_->forget(r.job.id);
    save(r, r.info.reason());
    dirty_ = true;
  }

  void stop(JobRecord& r, StopKind kind, const std::string& why) {
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
    signal_group(static_cast<pid_t>(r.info.pid()), SIGTERM);
    save(r, "SIGTERM: " + why);
  }

  void launch(JobRecord& r, const Placement& p) {
    const double now = wall_now();
    r.job.devices = cluster_.allocate(r.job, p);
    r.info.set_attempts(r.info.attempts() + 1);
    r.info.set_state(proto::RUNNING);
    r.info.set_last_start(now);
    if (r.info.first_start() == 0) r.info.set_first_start(now);
    r.job.last_start = now;
    if (r.job.first_start < 0) r.job.first_start = now;
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
    save(r, "starting attempt " + std::to_string(r.info.attempts()) + " on " + names);  // before the fork: see readopt

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
    {
      std::ofstream log(l.log_path, std::ios::app);
      log << "=== ember sched: job " << r.info.id() << " attempt " << r.info.attempts() << " on " << names << " ===\n";
    }
    pid_t pid = spawn_supervised(l);
    r.info.set_pid(pid);
    r.pid_start = process_start_time(pid);
    save(r, "");
  }

  // ---------------------------------------------------------------- scheduling

  SchedState state(double now) {
    waiting_.clear();
    running_.clear();
    for (auto& [id, r] : jobs_) {
      Job& j = r.job;
      j.executed = r.info.run_seconds();
      if (r.info.state() == proto::QUEUED) {
        j.status = JobStatus::kWaiting;
        waiting_.push_back(&j);
      } else if (r.info.state() == proto::RUNNING) {
        j.status = JobStatus::kRunning;
        j.executed += std::max(0.0, now - r.info.last_start());
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
    return s;
  }

  // A policy that returns an impossible decision is a bug, but one that must not take the jobs'
  // daemon down: it is reported, and the daemon asks again a second later.
  void schedule() {
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

  void decide_and_apply() {
    double now = wall_now();
    Decision d = policy_->decide(state(now));
    for (JobId id : d.preempt) {
      auto it = jobs_.find(id);
      EMBER_CHECK(it != jobs_.end() && it->second.info.state() == proto::RUNNING, "policy '", policy_->name(),
                  "' preempted job ", id, ", which is not running");
      stop(it->second, StopKind::kPreempt, "preempted by policy " + policy_->name());
    }
    for (const Start& st : d.start) {
      auto it = jobs_.find(st.job);
      EMBER_CHECK(it != jobs_.end() && it->second.info.state() == proto::QUEUED, "policy '", policy_->name(),
                  "' started job ", st.job, ", which is not queued");
      JobRecord& r = it->second;
      // A start onto devices that a preempted job still holds waits for that job's exit.
      if (!placement_problem(cluster_.free(), st.placement, r.job.spec.gpus, r.job.spec.mem_per_gpu).empty()) continue;
      try {
        launch(r, st.placement);
      } catch (const Error& e) {
        if (!r.job.devices.empty()) cluster_.release(r.job);
        r.job.devices.clear();
        r.info.clear_devices();
        r.info.set_state(proto::FAILED);
        r.info.set_finish_time(wall_now());
        r.info.set_reason(std::string("could not start: ") + e.what());
        r.job.status = JobStatus::kDone;
        save(r, r.info.reason());
      }
    }
    const double after = wall_now();
    wakeup_ = policy_->next_wakeup(state(after));
    // A wake-up that is already due must not spin the loop: decide again shortly instead.
    if (wakeup_ < kInf) wakeup_ = std::max(wakeup_, after + 0.05);
  }

  int timeout_ms() const {
    double now = wall_now(), t = 60;  // an idle daemon still wakes now and then
    if (wakeup_ < kInf) t = std::min(t, wakeup_ - now);
    for (const auto& [id, r] : jobs_) {
      if (r.info.state() == proto::STOPPING && !r.killed) t = std::min(t, r.stop_time + opt_.grace_s - now);
      if (r.adopted && r.active()) t = std::min(t, 0.1);  // adopted supervisors send no SIGCHLD
    }
    if (dirty_) t = 0;
    return static_cast<int>(std::ceil(std::max(0.0, t) * 1000));
  }

  // ---------------------------------------------------------------- requests

  void accept_all() {
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

  proto::Response handle(const proto::Request& req) {
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

  int64_t submit(const proto::JobSpec& spec_in) {
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

  void fill_info(const JobRecord& r, proto::JobInfo* out) const {
    *out = r.info;
    if (r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING)
      out->set_run_seconds(r.info.run_seconds() + std::max(0.0, wall_now() - r.info.last_start()));
  }

  void status(const proto::StatusRequest& q, proto::Response& resp) {
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

  int64_t next_id_hint() const { return jobs_.empty() ? 0 : jobs_.rbegin()->first; }

  void cancel(int64_t id) {
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

  void logs(const proto::LogsRequest& q, proto::Response& resp) {
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

  DaemonOptions opt_;
  Pool pool_;
  Cluster cluster_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Store> store_;
  std::string state_dir_;
  int lock_fd_ = -1, listen_fd_ = -1;
  std::map<int64_t, JobRecord> jobs_;
  std::vector<const Job*> waiting_, running_;
  double last_submit_ = 0, wakeup_ = kInf;
  bool dirty_ = false, draining_ = false;
};

}  // namespace

int serve(const DaemonOptions& opt) {
  EMBER_CHECK(!opt.state_dir.empty(), "--state: expected a folder for the daemon's socket, database and logs");
  Daemon d(opt);
  return d.run();
}

}  // namespace ember::sched
