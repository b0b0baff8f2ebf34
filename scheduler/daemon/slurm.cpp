#include "scheduler/daemon/slurm.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>

#include "core/error.h"

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

// Field `key` of `scontrol show job -o` output ("" when absent).
std::string field(const std::string& line, const std::string& key) {
  const std::string k = " " + key + "=";
  size_t at = (" " + line).find(k);
  if (at == std::string::npos) return "";
  at += k.size() - 1;
  const size_t end = line.find(' ', at);
  return line.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// GPUs in a GRES string: "gpu:4", "gpu:a100:4(S:0-1)", "gpu:2,mps:100".
int gpus_in(const std::string& gres) {
  int total = 0;
  std::stringstream ss(gres);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.rfind("gpu", 0) != 0) continue;
    item = item.substr(0, item.find('('));
    const size_t colon = item.rfind(':');
    if (colon == std::string::npos) continue;
    const std::string n = item.substr(colon + 1);
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos) total += std::stoi(n);
  }
  return total;
}

}  // namespace

Pool slurm_pool(const std::string& partition) {
  std::vector<std::string> argv = {"sinfo", "-h", "-N", "-o", "%N|%c|%G"};
  if (!partition.empty()) argv.insert(argv.end(), {"-p", partition});
  const Ran r = run(argv);
  EMBER_CHECK(r.status == 0,
              "--backend slurm: sinfo failed (is Slurm running and SLURM_CONF right?): ", trimmed(r.out));
  Pool p;
  std::set<std::string> seen;
  std::stringstream ss(r.out);
  for (std::string line; std::getline(ss, line);) {
    std::stringstream ls(line);
    std::string node, cpus, gres;
    if (!std::getline(ls, node, '|') || !std::getline(ls, cpus, '|')) continue;
    std::getline(ls, gres);
    if (node.empty() || !seen.insert(node).second) continue;
    const int g = gpus_in(gres);
    const int c = std::max(1, std::atoi(cpus.c_str()));
    for (int i = 0; i < (g > 0 ? g : c); ++i) {
      PoolDevice d;
      d.node = node;
      d.name = node + (g > 0 ? "/gpu" : "/cpu") + std::to_string(i);
      d.cuda_index = g > 0 ? i : -1;
      p.devices.push_back(d);
    }
  }
  EMBER_CHECK(!p.devices.empty(), "--backend slurm: sinfo lists no node",
              partition.empty() ? std::string() : " in partition " + partition);
  return p;
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
  // --parsable prints "ID" or "ID;cluster".
  const std::string id = out.substr(0, out.find(';'));
  EMBER_CHECK(r.status == 0 && !id.empty() && id.find_first_not_of("0123456789") == std::string::npos,
              "sbatch refused the job: ", out);
  return std::stoll(id);
}

SlurmJob slurm_job(int64_t id) {
  const Ran r = run({"scontrol", "show", "job", "-o", std::to_string(id)});
  SlurmJob j;
  if (r.status != 0) return j;  // "Invalid job id specified": forgotten (MinJobAge) or never known
  j.known = true;
  j.state = field(r.out, "JobState");
  j.reason = field(r.out, "Reason");
  static const std::set<std::string> kEnded = {"COMPLETED",     "FAILED",    "CANCELLED", "TIMEOUT",   "NODE_FAIL",
                                               "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",  "PREEMPTED", "SPECIAL_EXIT"};
  j.ended = kEnded.count(j.state) > 0;
  const std::string code = field(r.out, "ExitCode");  // "status:signal"
  const size_t colon = code.find(':');
  if (j.ended && colon != std::string::npos) {
    const int status = std::atoi(code.substr(0, colon).c_str()), sig = std::atoi(code.substr(colon + 1).c_str());
    j.exit_code = sig > 0 ? 128 + sig : status;
  }
  return j;
}

std::optional<int64_t> slurm_find(const std::string& name) {
  // Every state: a run that ended while no daemon watched is still in the controller's memory.
  const Ran r = run({"squeue", "-h", "-t", "all", "-n", name, "-o", "%i"});
  if (r.status != 0) return std::nullopt;
  std::optional<int64_t> newest;
  std::stringstream ss(r.out);
  for (std::string line; std::getline(ss, line);) {
    line = trimmed(line);
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos)
      newest = std::max<int64_t>(newest.value_or(0), std::stoll(line));
  }
  return newest;
}

void slurm_signal(int64_t id, int sig) {
  (void)run({"scancel", "--batch", "--signal=" + std::to_string(sig), std::to_string(id)});
}

void slurm_cancel(int64_t id) {
  (void)run({"scancel", std::to_string(id)});
}

}  // namespace ember::sched
