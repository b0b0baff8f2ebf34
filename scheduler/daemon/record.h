// One job as the daemon keeps it: the submitted spec, where it stands (the JobInfo the clients
// see) and the policies' view of it (sched::Job). The store persists it, the supervisor runs it,
// the daemon moves it between states.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "job.pb.h"
#include "scheduler/job.h"

namespace ember::sched {

enum class StopKind { kNone = 0, kPreempt = 1, kCancel = 2, kDrain = 3 };

struct JobRecord {
  proto::JobInfo info;  // id, spec, state, devices, pid, times, counters, exit code, reason, log
  Job job;              // what the policies read; job.executed is run time before the current run
  // Supervision of the current run (persisted, so that a restarted daemon can re-adopt it).
  uint64_t pid_start = 0;  // the supervisor's start time in clock ticks (/proc/PID/stat): guards pid reuse
  StopKind stop = StopKind::kNone;
  double stop_time = 0;  // when SIGTERM went out
  bool killed = false;   // SIGKILL went out after the grace period
  // Not persisted: whether the daemon is the supervisor's parent (else it re-adopted it and
  // polls /proc instead of waitpid).
  bool adopted = false;

  bool active() const {
    auto s = info.state();
    return s == proto::QUEUED || s == proto::RUNNING || s == proto::STOPPING;
  }
};

const char* state_name(proto::JobState s);

}  // namespace ember::sched
