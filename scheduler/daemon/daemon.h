// The live scheduler: `ember sched serve`. It owns a pool of devices, takes requests on a
// Unix-domain socket in its state folder, keeps every job in SQLite, and drives the same Policy
// objects as the trace simulator on the wall clock: at every submission, exit, cancellation and
// at the time the policy asks for, it hands the policy the waiting and running jobs and applies
// the decision — SIGTERM to the preempted (grace period, then SIGKILL; their checkpoint is their
// progress), a supervised child process for each start, with its devices in
// CUDA_VISIBLE_DEVICES / EMBER_DEVICES (and OMP_NUM_THREADS plus core affinity on CPU devices).
// Exit status 75 means "preempted, requeue me"; other failures restart up to the spec's
// max_restarts. Killed and restarted, the daemon re-adopts the jobs still running and requeues
// those that died meanwhile. Each request carries its sender's identity (the socket's peer
// credentials); who may do what is scheduler/daemon/access.h.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "scheduler/policy.h"

namespace ember::sched {

inline constexpr int kPreemptedExitCode = 75;  // EX_TEMPFAIL: the job checkpointed and wants to run again

struct DaemonOptions {
  std::string state_dir;
  std::string devices = "auto";  // see make_pool()
  // "local": jobs run on this machine's devices, each under a supervisor process. "slurm": Slurm
  // runs them (scheduler/daemon/slurm.h) on the nodes of `partition` ("" = Slurm's default),
  // which replace `devices`.
  std::string backend = "local";
  std::string partition;
  double cpu_memory_gib = 0;
  std::string policy = "fcfs";
  PolicyParams params;
  double grace_s = 30;  // SIGTERM -> SIGKILL
  // Seconds one preemption is expected to cost the preempted job (its checkpoint, the work since
  // the last one, the restart), told to the policy as the simulator's --preempt-cost is: the search
  // policies weigh a preemption against it.
  double preempt_cost = 0;
  // Seconds an elastic job's resize costs (stop, checkpoint, restart), amortised over its life by
  // the goodput allocator (docs/scheduler/elastic.md).
  double elastic_restart_s = 10;
  int max_queued = 1000;  // admission: queued jobs beyond this are refused
  bool quiet = false;     // no event lines on stdout
  std::string config;     // proto/daemon_config.proto in text format: groups and per-user limits ("" = defaults)
  // Team quotas (scheduler/teams.h): a file of "TEAM DEVICES" lines. The policy then runs inside
  // the teams (a job's team is its spec's queue), idle shares are lent and reclaimed through the
  // borrowers' checkpoints, and a job of a team without a share is refused. "" = no teams.
  std::string quota;
  // Admission control (scheduler/admission.h): every submission is answered with an estimate of
  // its start delay; with a target >= 0 seconds, one estimated over it is refused with the time to
  // resubmit. < 0: every job is admitted.
  double admit_target = -1;
  // A pool of device types (--devices cpu:N@TYPE,...): the speed table the policies read (CSV as
  // `sched simulate --speeds`; "" = the built-in one). A job's spec names its model.
  std::string speeds;
  // The web endpoint: /metrics (Prometheus) and a dashboard at / on "HOST:PORT" ("": none). A
  // non-loopback address needs http_allow_remote (scheduler/daemon/web.h).
  std::string http;
  bool http_allow_remote = false;
};

// Runs until drained (every job stopped or finished after a drain request) or until SIGTERM /
// SIGINT, which stop the daemon but leave its jobs running for the next daemon to re-adopt.
// Returns the process exit status. Throws ember::Error for a bad option or an unusable state folder.
int serve(const DaemonOptions& opt);

}  // namespace ember::sched
