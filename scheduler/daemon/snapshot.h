// What the daemon's web endpoint shows (/metrics, the dashboard): a copy of the daemon's state
// that the event loop publishes after each turn and the HTTP thread reads, so that the two threads
// share nothing else and neither waits on the other for more than a pointer swap. A snapshot is
// never changed once published.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "job.pb.h"

namespace ember::sched {

// A Prometheus histogram: cumulative counts are made when it is written out (metrics.h).
struct Histogram {
  std::vector<double> bounds;     // upper bounds, increasing (the +Inf bucket is implicit)
  std::vector<uint64_t> buckets;  // per bound, not cumulative; one more for +Inf
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), buckets(bounds.size() + 1, 0) {}
  void observe(double v);
};

// Bucket bounds in seconds: waits and run times of jobs (a second to a week), and requests on the
// socket (a tenth of a millisecond to ten seconds).
std::vector<double> job_seconds_buckets();
std::vector<double> request_seconds_buckets();

struct DeviceView {
  std::string name, type;  // type: the pool's device type, or "cpu" / "gpu" in an untyped pool
  double memory_gib = 0;
  std::string state;  // "free", "busy" (a running job) or "stopping" (a job stopping holds it)
  int64_t job = -1;
};

struct TeamView {
  std::string name;
  int share = 0;  // the quota: guaranteed devices
  int held = 0, queued = 0, running = 0;
};

struct UsagePoint {
  double time = 0;  // seconds since the Unix epoch
  int busy = 0;     // devices held by running or stopping jobs
  int queued = 0;   // jobs waiting
};

struct DaemonSnapshot {
  double taken_at = 0;
  std::string policy;
  bool draining = false;
  std::vector<DeviceView> devices;
  // The active jobs and the latest ended ones, redacted as for any user (Access::redact): the
  // endpoint has no caller's identity, so it shows what everyone may see. progress is left to
  // the reader (it reads the logs itself, at its own pace).
  std::vector<proto::JobInfo> jobs;
  std::map<int64_t, std::string> logs;        // job -> its log: read for progress, never served
  std::map<int64_t, double> estimated_start;  // queued jobs: admission's estimate, Unix time
  std::map<int64_t, double> queued_since;     // queued jobs: since when they wait (submission or requeue)
  std::vector<TeamView> teams;                // empty without --quota
  std::map<std::pair<std::string, std::string>, int64_t> job_counts;  // (state, team) -> jobs, ended ones too
  std::map<std::string, int64_t> preemptions;                         // team -> preemptions, every job's
  std::map<std::string, int64_t> admission;                           // decision -> submissions
  std::map<std::string, Histogram> queue_wait, completion;            // team -> seconds
  std::map<std::string, Histogram> request_seconds;                   // socket request -> seconds
  std::shared_ptr<const std::vector<UsagePoint>> history;             // oldest first
};

// What the daemon counts for its endpoint as it goes, on its event loop's thread; each snapshot
// carries a copy.
struct DaemonCounts {
  std::map<std::pair<std::string, std::string>, int64_t> ended;  // (state, team) of ended jobs
  std::map<std::string, int64_t> preemptions;                    // team -> preemptions
  std::map<std::string, int64_t> admission;                      // decision -> submissions
  std::map<std::string, Histogram> queue_wait, completion;       // team -> seconds
  std::map<std::string, Histogram> request_seconds;              // socket request -> seconds
  std::vector<int64_t> recent_ended;                             // the latest ended jobs, newest last
  std::shared_ptr<const std::vector<UsagePoint>> history;        // copied on write (snapshots share it)
};

// The latest snapshot, handed between the threads.
class SnapshotBox {
 public:
  void publish(std::shared_ptr<const DaemonSnapshot> s) {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = std::move(s);
  }
  std::shared_ptr<const DaemonSnapshot> latest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return latest_;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const DaemonSnapshot> latest_;
};

}  // namespace ember::sched
