// Jobs' lives under --backend slurm (scheduler/daemon/slurm.h): a run is a Slurm batch job, followed
// by asking Slurm about it, re-adopted by its id or name after a daemon restart, and signalled
// through scancel (signal_run). lifecycle.cpp holds what both backends share.
#include <signal.h>

#include <algorithm>
#include <map>
#include <string>

#include "core/error.h"
#include "scheduler/daemon/daemon_impl.h"
#include "scheduler/daemon/slurm.h"

namespace ember::sched::daemon_impl {

void Daemon::signal_run(JobRecord& r, int sig) {
  if (!slurm()) {
    signal_group(static_cast<pid_t>(r.info.pid()), sig);
  } else if (sig == SIGKILL) {
    slurm_cancel(r.info.slurm_job_id());
  } else {
    slurm_signal(r.info.slurm_job_id(), sig);
  }
}

// --backend slurm. A run is one Slurm batch job pinned to the node(s) of the devices the policy
// chose, asking for as many GPUs there (or CPUs, on nodes without GPUs); Slurm then picks which
// GPUs and sets CUDA_VISIBLE_DEVICES itself (on real GPUs: the tests' counted GPUs have no device
// files Slurm recognises, so it sets none there, and this part never ran). A gang that spans nodes gets each of its
// nodes with the GPUs of its largest share there (Slurm's --gres is per node).
void Daemon::launch_on_slurm(JobRecord& r, const std::string& names, const Launch& l) {
  SlurmRun run;
  run.name = slurm_name(r);
  run.partition = opt_.partition;
  std::map<std::string, int> per_node;
  for (int d : r.job.devices) per_node[pool_.devices[d].node] += 1;
  int widest = 0;
  for (const auto& [node, n] : per_node) {
    run.node += (run.node.empty() ? "" : ",") + node;
    widest = std::max(widest, n);
  }
  (pool_.cpu() ? run.cpus : run.gpus) = widest;
  run.workdir = l.workdir;
  run.log_path = l.log_path;
  run.command = l.command;
  run.args = l.args;
  run.env = l.env;
  run.env.erase("CUDA_VISIBLE_DEVICES");  // Slurm's choice of GPUs, not the pool's numbering
  if (pool_.cpu()) run.env["OMP_NUM_THREADS"] = run.env["OPENBLAS_NUM_THREADS"] = std::to_string(widest);
  if (l.run_as) {
    run.uid = l.run_as->uid;
    run.gid = l.run_as->gid;
  }
  const int64_t id = slurm_submit(run);  // throws: the caller marks the job as failed to start
  r.info.set_slurm_job_id(id);
  save(r, detail::concat("Slurm job ", id, " on ", run.node, " (", names, ")"));
}

void Daemon::poll_slurm() {
  // Once per kSlurmPollSeconds, not at every pass of the event loop: each question is a process.
  const double now = wall_now();
  if (now < next_slurm_poll_) return;
  next_slurm_poll_ = now + kSlurmPollSeconds;
  for (JobRecord* rp : active_jobs()) {
    JobRecord& r = *rp;
    if (!(r.info.state() == proto::RUNNING || r.info.state() == proto::STOPPING) || r.info.slurm_job_id() == 0)
      continue;
    const int64_t id = r.info.slurm_job_id();
    const SlurmJob s = slurm_job(id);
    if (!s.known) {
      // Forgotten by Slurm (its controller lost state, or MinJobAge passed while no daemon
      // watched): requeued, to resume from its checkpoint.
      finish_run(r, std::nullopt, detail::concat("Slurm no longer knows job ", id));
      continue;
    }
    if (!s.ended) continue;
    std::optional<int> code = s.exit_code;
    std::string note;
    if (s.state != "COMPLETED" && !(code && *code == kPreemptedExitCode)) {
      note = detail::concat("Slurm job ", id, ": ", s.state,
                            s.reason.empty() || s.reason == "None" ? "" : ", " + s.reason);
      // Ended by Slurm with no status of the program's own (a node failure, a cancellation
      // outside Ember): lost rather than done.
      if (code && *code == 0) code.reset();
    }
    finish_run(r, code, note);
  }
}

void Daemon::readopt_from_slurm(JobRecord& j) {
  std::vector<int> devs(j.info.devices().begin(), j.info.devices().end());
  j.job.devices = devs;
  j.job.status = JobStatus::kRunning;
  j.job.last_start = j.info.last_start();
  bool held = true;
  try {
    cluster_.allocate_exact(j.job, devs);
  } catch (const Error&) {
    held = false;
    j.job.devices.clear();
  }
  int64_t id = j.info.slurm_job_id();
  if (id == 0)  // the daemon stopped between recording the start and learning the job's id
    if (auto found = slurm_find(slurm_name(j))) id = *found;
  if (id == 0) {
    finish_run(j, std::nullopt, "its Slurm submission was not made before the daemon stopped");
    return;
  }
  j.info.set_slurm_job_id(id);
  save(j, detail::concat("re-adopted Slurm job ", id, " after a daemon restart"));
  if (!held) {
    stop(j, StopKind::kPreempt, "the device pool changed");
    return;
  }
  if (j.info.state() == proto::STOPPING && !j.killed) signal_run(j, SIGTERM);
}

}  // namespace ember::sched::daemon_impl
