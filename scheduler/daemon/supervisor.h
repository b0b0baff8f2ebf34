// Running a job's process so that it outlives the daemon. The daemon forks a small supervisor per
// run; the supervisor starts a new session (its own process group, away from the daemon's
// terminal), starts the job in it with the job's environment, cores and log file, waits for it,
// and records the exit status in a file before exiting with the same status. A daemon that is
// killed and restarted cannot wait for a supervisor it did not fork, so it re-adopts it by pid
// (checked against the process's start time, so a reused pid is not mistaken for it) and reads
// the exit file once the pid is gone. Signals go to the whole process group: SIGTERM reaches the
// job (the supervisor blocks it), SIGKILL takes both. A job may run as another user than the
// daemon's (Launch::run_as): the job process opens its log, then drops to that user for good before
// it enters its working directory and runs.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/daemon/identity.h"

namespace ember::sched {

struct Launch {
  std::string command;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;  // set on top of the daemon's environment
  std::string workdir;
  std::string log_path;    // stdout and stderr, appended
  std::string exit_path;   // the supervisor writes the exit code here (atomically)
  std::string pid_path;    // and its own pid here, first thing
  std::vector<int> cores;  // CPU affinity; empty: inherit
  // The user the job runs as (the supervisor itself stays the daemon's user, so that the job
  // cannot touch its exit file); nullopt: the daemon's own user.
  std::optional<Identity> run_as;
  mode_t umask = 022;  // the job's file-creation mask
};

// Forks the supervisor; returns its pid (also the job's process group id). Throws ember::Error
// when fork fails. The job's own start failure (no such program) shows in its log with exit 127.
pid_t spawn_supervised(const Launch& l);

// The process's start time in clock ticks since boot (/proc/PID/stat field 22); 0 when there is
// no such process or it is a zombie.
uint64_t process_start_time(pid_t pid);
// True when `pid` runs and started at `start` (0: any start time).
bool process_alive(pid_t pid, uint64_t start);

// Sends `sig` to the process group `pgid` (to the supervisor itself while it has not made its
// group yet); false when none of it is left.
bool signal_group(pid_t pgid, int sig);

// The exit code an exit file holds; nullopt when the file is missing or malformed.
std::optional<int> read_exit_file(const std::string& path);
std::optional<pid_t> read_pid_file(const std::string& path);

// waitpid status -> exit code, or 128 + signal number.
int exit_code_of(int wait_status);

// A program name resolved as execvp would (relative to `workdir` when it holds a '/'); empty when
// there is no such executable.
std::string find_program(const std::string& command, const std::string& workdir, const std::string& path_env);

}  // namespace ember::sched
