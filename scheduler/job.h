// A job as the scheduler sees it: what was asked for (JobSpec, fixed at submission) and how far it
// has got (Job, updated by whoever drives the policies: the trace simulator or the daemon). Policies
// only read Jobs; the driver owns them, so the same policy objects work on a simulated clock and
// on a real one.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ember::sched {

using JobId = std::int64_t;

inline constexpr double kInf = std::numeric_limits<double>::infinity();

struct JobSpec {
  std::string name;        // the submitter's id (a trace's job_id)
  double submit = 0;       // seconds on the driver's clock
  int gpus = 1;            // gang size: all devices at once or none
  double mem_per_gpu = 0;  // GiB needed on each device; 0 fits any device
  double duration = -1;    // true run time in seconds; only a simulator knows it (<0: unknown)
  double estimate = -1;    // the submitter's expected run time in seconds (<0: none given)
  int priority = 0;        // larger runs first under the priority policy
  std::string queue;       // team or virtual cluster
  std::string model;       // model family, for per-device-type speeds (scheduler/speeds.h); "" = any
  // Seconds of work between the job's checkpoints: a preemption loses the work since the last one.
  // 0: the job checkpoints when it is stopped (nothing lost); < 0: the driver's default.
  double checkpoint_interval = -1;
};

// The work a preemption throws away: what was done since the last checkpoint, for a job that
// checkpoints every `interval` seconds of `work` (interval <= 0: it checkpoints when stopped and
// loses nothing). One rule for the simulator and the daemon.
inline double work_lost_to_preemption(double work, double interval) {
  if (interval <= 0 || work <= 0) return 0.0;
  return work - std::floor(work / interval) * interval;
}

enum class JobStatus { kPending, kWaiting, kRunning, kDone };

struct Job {
  JobId id = -1;
  JobSpec spec;
  JobStatus status = JobStatus::kPending;
  // Seconds run on its gang before its current run (all of them when it is not running), repeated
  // work included. A running job's current run is added from `last_start` by the methods below,
  // so a driver never has to touch every running job at every event (the simulator at cluster
  // scale: tens of thousands of them, millions of events).
  double executed = 0;
  double overhead = 0;         // seconds of work added by preemptions (checkpoint, restore, lost work)
  double stopping_until = -1;  // a preempted job holds its devices until then (driver's bookkeeping)
  int preemptions = 0;
  double queued_since = 0;  // when it last entered the queue: submission or preemption
  double last_start = -1;   // when its current or latest run began
  double first_start = -1;
  double finish = -1;
  std::vector<int> devices;  // global device indices held while running
  // Seconds of work per second on its current devices: 1, or the speed of its model on the
  // slowest device type it holds in a heterogeneous cluster (the simulator's, scheduler/speeds.h).
  // Work is counted in seconds on the reference type, the trace's durations.
  double rate = 1;

  // Seconds run on its gang by `now`, repeated work included (reference-type seconds).
  double executed_at(double now) const {
    if (status != JobStatus::kRunning || last_start < 0 || now <= last_start) return executed;
    return executed + (now - last_start) * rate;
  }
  // GPU-seconds consumed: what least-attained-service policies rank by.
  double attained(double now) const { return executed_at(now) * spec.gpus; }
  // Seconds of its own work done: run time less what preemptions added. At the end, what a
  // driver reports as the job's run time to the policies and predictors that learn from it.
  double work(double now) const {
    const double e = executed_at(now);
    return e > overhead ? e - overhead : 0.0;
  }

  // Seconds still to run if the estimate is right; +inf without an estimate. Never below one
  // second: a job that outlives its estimate is treated as about to finish, not as free.
  double estimated_remaining(double now) const {
    if (spec.estimate < 0) return kInf;
    double r = spec.estimate + overhead - executed_at(now);
    return r < 1.0 ? 1.0 : r;
  }
  // Seconds still to run from the true duration (an oracle's view); falls back to the estimate.
  double true_remaining(double now) const {
    if (spec.duration < 0) return estimated_remaining(now);
    double r = spec.duration + overhead - executed_at(now);
    return r < 0 ? 0 : r;
  }
};

// The groups a job's history is kept in, most specific first: its queue and gang size, its queue,
// its gang size, every job (the duration predictor's and the Gittins policy's). A queue name may
// hold any character, so the gang size and a tag come first, before a separator no number holds.
inline std::array<std::string, 4> history_groups(const std::string& queue, int gpus) {
  const std::string n = std::to_string(gpus);
  return {n + "|" + queue, "q|" + queue, n + "|*", "*"};
}

}  // namespace ember::sched
