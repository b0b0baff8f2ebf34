// The daemon's Slurm backend (`ember sched serve --backend slurm`): Ember keeps its queue, policy
// and state, and Slurm runs the jobs. Everything goes through Slurm's command-line interface, as
// submitit and torchx do: sinfo for the pool, sbatch to start a run pinned to the node the policy
// chose, scontrol to follow it, scancel to signal and kill it. No accounting database is needed
// (scontrol remembers an ended job for MinJobAge seconds, 300 by default; the daemon looks at its
// jobs every half second).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/daemon/pool.h"

namespace ember::sched {

// The pool of a Slurm partition ("" = the default one): each node becomes a node of the policies'
// topology, with its GPUs (GRES gpu:K) as devices, or, on nodes without GPUs, one device per CPU.
// Throws ember::Error when sinfo fails or lists no node.
Pool slurm_pool(const std::string& partition);

struct SlurmRun {
  std::string name;  // --job-name, how a daemon that restarted finds the run again
  std::string partition;
  std::string node;
  int gpus = 0;  // --gres=gpu:K on that node (0: CPU devices)
  int cpus = 0;  // --cpus-per-task (CPU devices)
  std::string workdir, log_path;
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::optional<uid_t> uid;  // run as this user (a root daemon running a user's job)
  std::optional<gid_t> gid;
};

// Submits the run; returns Slurm's job id. Throws ember::Error with sbatch's own message.
int64_t slurm_submit(const SlurmRun& run);

struct SlurmJob {
  bool known = false;  // false: Slurm no longer (or never) knew the id
  bool ended = false;
  std::string state;             // RUNNING, PENDING, COMPLETED, FAILED, CANCELLED, NODE_FAIL, ...
  std::string reason;            // Slurm's Reason= field
  std::optional<int> exit_code;  // the batch step's status, 128 + signal when killed by one
};
SlurmJob slurm_job(int64_t id);

// The id of the newest job called `name`, if Slurm knows one (squeue, then scontrol).
std::optional<int64_t> slurm_find(const std::string& name);

// scancel --signal=SIG --batch: the batch step is the job's own program (the script execs it).
void slurm_signal(int64_t id, int sig);
// scancel: SIGTERM, then SIGKILL after Slurm's KillWait.
void slurm_cancel(int64_t id);

}  // namespace ember::sched
