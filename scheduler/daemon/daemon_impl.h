// The daemon's internals (scheduler/daemon/daemon.h is its interface): one class whose methods
// live in four files: daemon.cpp (start-up, the event loop, scheduling), lifecycle.cpp (starting,
// stopping, reaping and re-adopting jobs), lifecycle_slurm.cpp (the same under --backend slurm)
// and requests.cpp (what clients ask over the socket).
#pragma once

#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "scheduler/admission.h"
#include "scheduler/daemon/access.h"
#include "scheduler/daemon/daemon.h"
#include "scheduler/daemon/pool.h"
#include "scheduler/daemon/progress.h"
#include "scheduler/daemon/record.h"
#include "scheduler/daemon/snapshot.h"
#include "scheduler/daemon/store.h"
#include "scheduler/daemon/supervisor.h"
#include "scheduler/daemon/web.h"
#include "scheduler/elastic/allocate.h"
#include "scheduler/elastic/live_job.h"
#include "scheduler/speeds.h"
#include "scheduler/teams.h"

namespace ember::sched::daemon_impl {

inline double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A submission refused because its estimated start is over --admit-target (counted apart from
// other refusals in the metrics).
struct AdmissionDeferred : Error {
  using Error::Error;
};

class Daemon {
 public:
  explicit Daemon(const DaemonOptions& o);
  int run();

 private:
  friend class DaemonTarget;  // its side of apply_decision() (daemon.cpp)
  template <typename... A>
  void say(const A&... a) {
    if (opt_.quiet) return;
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    char buf[32];
    std::strftime(buf, sizeof(buf), "%H:%M:%S", ::localtime_r(&t, &tm));  // the web endpoint's thread says things too
    std::cout << ("[" + std::string(buf) + "] " + detail::concat(a...) + "\n") << std::flush;
  }

  std::string job_dir(int64_t id) const {
    return (std::filesystem::path(state_dir_) / "jobs" / std::to_string(id)).string();
  }

  std::string exit_path(const JobRecord& r) const {
    return job_dir(r.info.id()) + "/exit-" + std::to_string(r.info.attempts());
  }

  std::string pid_path(const JobRecord& r) const {
    return job_dir(r.info.id()) + "/pid-" + std::to_string(r.info.attempts());
  }

  // Queued, running and stopping jobs (a snapshot, so that a loop over it may change states).
  // Finished ones stay in jobs_ for status --all, but no loop of the event loop walks them: the
  // daemon's work per event grows with the jobs alive, not with its history.
  std::vector<JobRecord*> active_jobs() const {
    std::vector<JobRecord*> out;
    out.reserve(active_.size());
    for (const auto& [id, r] : active_) out.push_back(r);
    return out;
  }
  void track(JobRecord& r) {
    if (r.active())
      active_[r.info.id()] = &r;
    else
      active_.erase(r.info.id());
  }

  int count_state(proto::JobState s) const {
    int n = 0;
    for (const auto& [id, r] : active_) n += r->info.state() == s;
    return n;
  }

  // Persists a transition (`what` non-empty: also an event, printed unless --quiet).
  void save(JobRecord& r, const std::string& what);
  void recover();
  void relearn();  // tells the policy and admission control the finished jobs of the state database
  // A job that finished well (exit 0): the policy and admission control learn its run time (its
  // runs less the work preemptions repeated), at its finish and from every later daemon.
  void learn_from(JobRecord& r);
  void readopt(JobRecord& j);
  void reap();
  void poll_adopted();
  // Sends `sig` to a job's run: its process group, or under --backend slurm its Slurm job
  // (SIGKILL: scancel). The one place that knows how a run is signalled (lifecycle_slurm.cpp).
  void signal_run(JobRecord& r, int sig);
  // --backend slurm: follows the runs Slurm has, and ends those that ended there (at most every
  // kSlurmPollSeconds).
  void poll_slurm();
  static constexpr double kSlurmPollSeconds = 0.5;
  bool slurm() const { return opt_.backend == "slurm"; }
  void launch_on_slurm(JobRecord& r, const std::string& names, const Launch& l);
  void readopt_from_slurm(JobRecord& j);
  std::string slurm_name(const JobRecord& r) const {
    return "ember-" + std::to_string(r.info.id()) + "-" + std::to_string(r.info.attempts());
  }
  void enforce_grace();
  // A run ended with `code` (nullopt: unknown). Frees the devices and decides what comes next.
  void finish_run(JobRecord& r, std::optional<int> code, const std::string& note);
  void stop(JobRecord& r, StopKind kind, const std::string& why);
  void launch(JobRecord& r, const Placement& p);
  SchedState state(double now);
  // A policy that returns an impossible decision is a bug, but one that must not take the jobs'
  // daemon down: it is reported, and the daemon asks again a second later.
  void schedule();
  void decide_and_apply();

  // Elastic jobs (elastic_jobs.cpp): what the daemon learned of each from its reports (kept in the
  // job's record, JobInfo.elastic_learned, so that a restarted daemon goes on from it), the
  // allocator's pass before the rigid policy decides, and the environment a run gets.
  struct ElasticState {
    elastic::LiveJob model;
    int64_t last_step = -1;  // the step of the latest report taken
    bool reported = false;   // this run has reported
    int resizes = 0;
  };
  std::map<int64_t, ElasticState> elastic_;
  ElasticState& elastic_state(const JobRecord& r);
  // Copies what `e` holds into r.info, which the job's next save persists.
  void remember_elastic(JobRecord& r, const ElasticState& e);
  void read_elastic_report(JobRecord& r, ElasticState& e);
  elastic::CountRequest count_request(JobRecord& r, double now);
  void elastic_pass(double now);
  void resize(JobRecord& r, int allocated);
  void elastic_launch_env(JobRecord& r, Launch& l);
  bool elastic_running() const;
  int timeout_ms() const;
  void accept_all();
  proto::Response handle(const proto::Request& req, const Identity& who);
  int64_t submit(const proto::JobSpec& spec_in, const Identity& who);
  // Refuses a spec whose paths its owner could not use (a daemon running jobs as their owners).
  void check_paths_as(const Identity& who, const proto::JobSpec& spec);
  // The job as clients see it: its run time up to now, and an active job's latest progress report.
  void fill_info(const JobRecord& r, proto::JobInfo* out) const;
  void status(const proto::StatusRequest& q, proto::Response& resp, const Identity& who);
  // status --teams (team_report.cpp): each team's share, use and fairness.
  void team_report(proto::Response& resp) const;
  int64_t next_id_hint() const;
  // The job `id`, which `who` must own (or administer) to do `what`.
  JobRecord& job_for(int64_t id, const Identity& who, const char* what);
  void cancel(int64_t id, const Identity& who);
  void preempt(int64_t id, const Identity& who);
  void logs(const proto::LogsRequest& q, proto::Response& resp, const Identity& who);
  // Devices held (running or stopping jobs) by each owner.
  std::map<uid_t, int> devices_by_owner() const;
  // Would starting `r` take its owner past their device limit, given `held`?
  bool over_device_limit(const JobRecord& r, const std::map<uid_t, int>& held) const;
  void secure_state_dir();

  // The web endpoint (--http; monitor.cpp): what the daemon counts for it, and the snapshot of its
  // state handed to it after every turn of the event loop.
  void count_start(const JobRecord& r, double now);  // a start: its wait in the queue
  void count_end(const JobRecord& r);                // a job ended: its state, its completion time
  void count_request(const std::string& kind, double seconds);
  void record_usage(double now);  // a point of the utilisation history, when busy or queued changed
  std::vector<DeviceView> device_views() const;
  void add_job_views(DaemonSnapshot& s) const;
  void publish_snapshot();
  DaemonCounts counts_;
  std::unique_ptr<WebEndpoint> web_;
  mutable ProgressReader progress_;  // the event loop's own (the endpoint's thread has another)

  DaemonOptions opt_;
  Access access_;
  mode_t job_umask_ = 022;  // the umask the daemon was started with, which its jobs get back
  Pool pool_;
  Cluster cluster_;
  std::unique_ptr<Policy> policy_;
  Shares shares_;  // team quotas (empty: none)
  std::unique_ptr<AdmissionControl> admission_;
  SpeedTable speeds_;  // a typed pool's speeds
  SpeedFn speed_fn_;   // empty: one device type
  // A job's speed on each type of `t` (which must outlive it) by the pool's table; a job that
  // names no model runs at 1 everywhere.
  SpeedFn speeds_on(const Topology& t) const {
    return [this, &t](const JobSpec& j, int type) {
      return j.model.empty() ? 1.0 : speeds_.speed(j.model, t.type_name(type));
    };
  }
  // Admitted jobs not yet started: their start estimate and when they were admitted (calibration).
  std::map<int64_t, std::pair<double, double>> estimates_;
  double last_estimate_ = 0;  // the latest submission's start estimate, for its answer
  std::string last_basis_;    // and what it rests on (admission.h's estimate_basis)
  // Throws ember::Error naming the job when its team has no share (quotas only).
  void check_team(const proto::JobSpec& spec, const std::string& what) const;
  std::unique_ptr<Store> store_;
  std::string state_dir_;
  int lock_fd_ = -1, listen_fd_ = -1;
  std::map<int64_t, JobRecord> jobs_;
  std::map<int64_t, JobRecord*> active_;  // the active ones among jobs_ (track())
  std::vector<const Job*> waiting_, running_;
  double last_submit_ = 0, wakeup_ = kInf, next_slurm_poll_ = 0;
  bool dirty_ = false, draining_ = false;
};

}  // namespace ember::sched::daemon_impl
