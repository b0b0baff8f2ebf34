#include "scheduler/daemon/slurm.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "scheduler/daemon/slurm_output.h"

namespace ember::sched {
namespace {

struct Ran {
  int status = -1;  // exit status; -1: could not run
  std::string out;  // stdout and stderr together
};

// Runs a Slurm command without a shell, with `input` on its standard input, and returns what it
// printed. The daemon is one thread, so waiting here for the command's own pid takes nothing from
// its SIGCHLD handling of jobs.
Ran run(const std::vector<std::string>& argv, const std::string& input = "") {
  int fds[2], in[2];
  EMBER_CHECK(::pipe(fds) == 0, "slurm: cannot make a pipe: ", std::strerror(errno));
  if (::pipe(in) != 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    EMBER_FAIL("slurm: cannot make a pipe: ", std::strerror(e));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {fds[0], fds[1], in[0], in[1]}) ::close(fd);
    EMBER_FAIL("slurm: cannot fork to run ", argv[0], ": ", std::strerror(e));
  }
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    for (int fd : {fds[0], fds[1], in[0], in[1]}) ::close(fd);
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    std::fprintf(stderr, "cannot run %s: %s\n", a[0], std::strerror(errno));
    _exit(127);
  }
  ::close(fds[1]);
  ::close(in[0]);
  // The command reads all of its input before it prints (sbatch reads the whole script first).
  for (size_t off = 0; off < input.size();) {
    const ssize_t w = ::write(in[1], input.data() + off, input.size() - off);
    if (w > 0)
      off += static_cast<size_t>(w);
    else if (w < 0 && errno != EINTR)
      break;
  }
  ::close(in[1]);
  Ran r;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      if (r.out.size() < (1u << 20)) r.out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A word for sh: single-quoted, its own single quotes spelled '\''.
std::string sh_word(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'')
      o.append("'\\''");
    else
      o.push_back(c);
  }
  o.push_back('\'');
  return o;
}

}  // namespace

Pool slurm_pool(const std::string& partition) {
  std::vector<std::string> argv = {"sinfo", "-h", "-N", "-o", "%N|%c|%G"};
  if (!partition.empty()) argv.insert(argv.end(), {"-p", partition});
  const Ran r = run(argv);
  EMBER_CHECK(r.status == 0,
              "--backend slurm: sinfo failed (is Slurm running and SLURM_CONF right?): ", trimmed(r.out));
  return parse_sinfo(r.out, partition);
}

int64_t slurm_submit(const SlurmRun& run_) {
  // The script (on sbatch's standard input: nothing is written to disk) execs the program, so that
  // the batch step is the job itself: a signal to the batch step reaches the program, and its
  // exit status is the step's.
  std::string script = "#!/bin/sh\n# written by ember sched serve --backend slurm\n";
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about " " + std::string here.
  for (const auto& [k, v] : run_.env) script.append("export ").append(k).append("=").append(sh_word(v)).append("\n");
  script.append("exec ").append(sh_word(run_.command));
  for (const std::string& a : run_.args) script.append(" ").append(sh_word(a));
  script.append("\n");

  // One task per node of the run (a gang over several nodes gets them all: Slurm refuses a
  // --nodelist of more nodes than --nodes); the batch script runs on the first, and the program
  // reaches the others through srun or mpirun inside the allocation.
  const std::string nodes = std::to_string(std::count(run_.node.begin(), run_.node.end(), ',') + 1);
  std::vector<std::string> argv = {"sbatch",
                                   "--parsable",
                                   "--job-name=" + run_.name,
                                   "--nodes=" + nodes,
                                   "--ntasks=" + nodes,
                                   "--ntasks-per-node=1",
                                   "--nodelist=" + run_.node,
                                   "--output=" + run_.log_path,
                                   "--open-mode=append",
                                   "--export=ALL",
                                   "--no-requeue"};
  if (!run_.partition.empty()) argv.push_back("--partition=" + run_.partition);
  if (!run_.workdir.empty()) argv.push_back("--chdir=" + run_.workdir);
  if (run_.gpus > 0) argv.push_back("--gres=gpu:" + std::to_string(run_.gpus));
  if (run_.cpus > 0) argv.push_back("--cpus-per-task=" + std::to_string(run_.cpus));
  if (run_.uid) argv.push_back("--uid=" + std::to_string(*run_.uid));
  if (run_.gid) argv.push_back("--gid=" + std::to_string(*run_.gid));
  const Ran r = run(argv, script);
  const std::string out = trimmed(r.out);
  const std::optional<int64_t> id = parse_sbatch_id(out);
  EMBER_CHECK(r.status == 0 && id, "sbatch refused the job: ", out);
  return *id;
}

SlurmJob slurm_job(int64_t id) {
  const Ran r = run({"scontrol", "show", "job", "-o", std::to_string(id)});
  if (r.status != 0) return SlurmJob{};  // "Invalid job id specified": forgotten (MinJobAge) or never known
  return parse_scontrol_job(r.out);
}

std::optional<int64_t> slurm_find(const std::string& name) {
  // Every state: a run that ended while no daemon watched is still in the controller's memory.
  const Ran r = run({"squeue", "-h", "-t", "all", "-n", name, "-o", "%i"});
  if (r.status != 0) return std::nullopt;
  return parse_squeue_newest(r.out);
}

void slurm_signal(int64_t id, int sig) {
  (void)run({"scancel", "--batch", "--signal=" + std::to_string(sig), std::to_string(id)});
}

void slurm_cancel(int64_t id) {
  (void)run({"scancel", std::to_string(id)});
}

}  // namespace ember::sched
