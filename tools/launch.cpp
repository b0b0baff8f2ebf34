// `ember launch -n N [--hosts H] [--rank0-only] -- PROGRAM ARGS`: starts N ranks of a program
// through mpirun with what a data-parallel job needs: --oversubscribe when N exceeds the cores,
// the flags OpenMPI wants when run as root, one math thread share per rank (OMP_NUM_THREADS), one
// device per rank (EMBER_DEVICE=cuda:<local rank> on GPU machines, else cpu). Each rank runs
// under a small wrapper (this same program, `ember launch --as-rank`) that prefixes its output
// lines with "[rank R] " (or drops the stdout of ranks other than 0), forwards SIGINT/SIGTERM to
// it and records its exit status, so the launcher returns the worst status of all ranks.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {
namespace {

namespace fs = std::filesystem;

// How long the other ranks may go on after one has failed before the launcher ends them.
constexpr double kFailureGrace = 30.0;

// Seconds between forwarding SIGINT/SIGTERM and killing what still runs: EMBER_LAUNCH_KILL_AFTER,
// else kFailureGrace.
double kill_grace_seconds() {
  if (const char* v = std::getenv("EMBER_LAUNCH_KILL_AFTER")) {
    char* end = nullptr;
    double s = std::strtod(v, &end);
    if (*v && *end == '\0' && s > 0 && s < 1e6) return s;
    std::cerr << "ember launch: ignoring EMBER_LAUNCH_KILL_AFTER='" << v << "' (expected seconds > 0)\n";
  }
  return kFailureGrace;
}

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_pending = 0;  // launcher: a signal to forward to the ranks

void forward_signal(int sig) {
  if (g_child > 0) ::kill(g_child, sig);
}

void note_signal(int sig) {
  g_pending = sig;
}

// `handler` runs for SIGINT and SIGTERM; without SA_RESTART, so waitpid() returns EINTR.
void install(void (*handler)(int)) {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// A wait status as a shell reports it: the exit code, or 128 + the signal.
int status_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string find_in_path(const std::string& name) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "/usr/bin:/bin";
  for (size_t at = 0; at <= p.size();) {
    size_t colon = std::min(p.find(':', at), p.size());
    fs::path cand = fs::path(p.substr(at, colon - at)) / name;
    if (::access(cand.c_str(), X_OK) == 0) return cand.string();
    at = colon + 1;
  }
  return "";
}

int local_gpu_count() {
  // The NVIDIA driver lists one folder per GPU; CUDA_VISIBLE_DEVICES narrows it as CUDA would.
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    (void)e;
    ++n;
  }
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES")) {
    std::string v = vis;
    if (v.empty()) return 0;
    int listed = static_cast<int>(std::count(v.begin(), v.end(), ',')) + 1;
    n = std::min(n, listed);
  }
  return n;
}

std::vector<char*> c_args(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// ---------------------------------------------------------------- the per-rank wrapper
// Copies complete lines from `fd` to `out` with `prefix`; returns false at end of file.
bool pump(int fd, std::string& pending, FILE* out, const std::string& prefix, bool keep) {
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) {
    if (!pending.empty() && keep) std::fprintf(out, "%s%s\n", prefix.c_str(), pending.c_str());
    pending.clear();
    std::fflush(out);
    return false;
  }
  pending.append(buf, static_cast<size_t>(n));
  for (size_t nl; (nl = pending.find_first_of("\n\r")) != std::string::npos;) {
    std::string line = pending.substr(0, nl);
    pending.erase(0, nl + 1);
    if (keep && !line.empty()) std::fprintf(out, "%s%s\n", prefix.c_str(), line.c_str());
  }
  std::fflush(out);
  return true;
}

// This rank's number, after setting EMBER_DEVICE (unless set) to its device: cuda:<local rank> on a
// machine with GPUs, else cpu.
int rank_and_device() {
  const char* r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!r) r = std::getenv("PMIX_RANK");
  const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  int local = lr ? std::atoi(lr) : 0;
  int gpus = local_gpu_count();
  std::string device = gpus > 0 ? "cuda:" + std::to_string(local % gpus) : "cpu";
  if (!std::getenv("EMBER_DEVICE")) ::setenv("EMBER_DEVICE", device.c_str(), 1);
  return r ? std::atoi(r) : 0;
}

// Starts the program with its standard output and error on the write ends of two pipes; returns
// its pid (or -1, reported).
pid_t spawn(std::vector<std::string>& program, const int out_pipe[2], const int err_pipe[2]) {
  pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("ember launch: fork");
    return -1;
  }
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    auto argv = c_args(program);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "ember launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  return pid;
}

// One of the program's two output streams as the wrapper copies it.
struct Stream {
  int fd;
  FILE* out;
  bool keep;  // shown (else read and dropped)
  std::string pending;
  bool open = true;
};

// Copies both streams, line by line with `prefix`, until they close or the program has exited;
// then what it wrote just before it exited. Returns its wait status.
int copy_output(pid_t pid, Stream (&s)[2], const std::string& prefix) {
  bool exited = false;
  int status = 0;
  while (s[0].open || s[1].open) {
    pollfd fds[2] = {{s[0].open ? s[0].fd : -1, POLLIN, 0}, {s[1].open ? s[1].fd : -1, POLLIN, 0}};
    int ready = ::poll(fds, 2, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready > 0) {
      for (int i = 0; i < 2; ++i)
        if (s[i].open && (fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
          s[i].open = pump(s[i].fd, s[i].pending, s[i].out, prefix, s[i].keep);
      continue;
    }
    // Nothing to read: when the program has exited, a process it left behind may still hold the
    // pipes open; its output so far has been copied, so stop here.
    if (!exited && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (exited) break;
  }
  // What the program wrote just before it exited is still in the pipes: copy it without
  // blocking on a pipe that a leftover process holds open.
  for (Stream& st : s) {
    ::fcntl(st.fd, F_SETFL, ::fcntl(st.fd, F_GETFL) | O_NONBLOCK);
    for (int i = 0; st.open && i < 1024; ++i) {
      pollfd p{st.fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0 || !pump(st.fd, st.pending, st.out, prefix, st.keep)) break;
    }
    if (!st.pending.empty() && st.keep) std::fprintf(st.out, "%s%s\n", prefix.c_str(), st.pending.c_str());
    std::fflush(st.out);
    ::close(st.fd);
  }
  while (!exited && ::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// Writes `value` to status_dir/name (the launcher reads the rank's pid and exit status there).
void record(const std::string& status_dir, const std::string& name, long value) {
  if (status_dir.empty()) return;
  std::error_code ec;
  fs::create_directories(status_dir, ec);
  std::ofstream(fs::path(status_dir) / name) << value << "\n";
}

int run_as_rank(const std::string& status_dir, bool rank0_only, std::vector<std::string> program) {
  const int rank = rank_and_device();
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) {
    std::perror("ember launch: pipe");
    return 1;
  }
  pid_t pid = spawn(program, out_pipe, err_pipe);
  if (pid < 0) return 1;
  g_child = pid;
  install(forward_signal);
  // The launcher signals this wrapper directly (mpirun would end the other ranks at the first
  // exit, before they had handled the signal themselves).
  record(status_dir, "pid" + std::to_string(rank), ::getpid());
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Stream streams[2] = {{out_pipe[0], stdout, !rank0_only || rank == 0, {}, true},
                       {err_pipe[0], stderr, true, {}, true}};
  const int code = status_code(copy_output(pid, streams, "[rank " + std::to_string(rank) + "] "));
  record(status_dir, "rank" + std::to_string(rank), code);
  return code;
}

// ---------------------------------------------------------------- the launcher
// --hosts H1:S1,H2 (mpirun --host): host names, each with an optional positive slot count (mpirun
// gives a host named without one a single slot).
struct Host {
  std::string name;
  long slots = 1;
};

std::vector<Host> parse_hosts(const std::string& hosts) {
  auto bad = [&](const std::string& why) {
    throw UsageError("--hosts: expected HOST[:SLOTS],... (e.g. node1:4,node2:4), got '" + hosts + "': " + why);
  };
  if (hosts.empty()) bad("empty");
  std::vector<Host> out;
  for (const std::string& item : split_commas(hosts)) {
    const size_t colon = item.find(':');
    if (colon == 0 || item.empty()) bad("a host without a name");
    Host h{item.substr(0, colon)};
    if (colon != std::string::npos) {
      const std::string slots = item.substr(colon + 1);
      if (slots.empty() || slots.size() > 6 || slots.find_first_not_of("0123456789") != std::string::npos ||
          std::stol(slots) < 1)
        bad("'" + item + "' has slots that are not a whole number >= 1");
      h.slots = std::stol(slots);
    }
    out.push_back(h);
  }
  return out;
}

// What mpirun would find only after it had started some ranks, or report as a bare "ssh: Could not
// resolve hostname": more ranks than slots, and a host whose name has no address. (This machine's
// own name needs none: mpirun runs its ranks without a network.)
void check_hosts(long n, const std::vector<Host>& hosts) {
  long slots = 0;
  std::string listed;
  for (const Host& h : hosts) {
    slots += h.slots;
    listed += (listed.empty() ? "" : ", ") + h.name + ":" + std::to_string(h.slots);
  }
  EMBER_CHECK(n <= slots, "-n ", n, " ranks, but --hosts gives only ", slots, " slots (", listed,
              "); give more slots (HOST:SLOTS) or fewer ranks");
  char self[256] = {};
  ::gethostname(self, sizeof self - 1);
  for (const Host& h : hosts) {
    if (h.name == self || h.name == "localhost") continue;
    addrinfo hint{};
    hint.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int err = ::getaddrinfo(h.name.c_str(), nullptr, &hint, &found);
    if (found) ::freeaddrinfo(found);
    EMBER_CHECK(err == 0, "--hosts names '", h.name, "', which is not a known host here (", ::gai_strerror(err),
                "; this machine is '", self, "'); check the name, or add it to DNS or /etc/hosts on every host");
  }
}

// The mpirun command line that starts the ranks, each under this program's per-rank wrapper.
std::vector<std::string> mpirun_command(const std::string& mpirun, long n, const std::string& hosts, bool rank0_only,
                                        const std::string& status_dir, const std::vector<std::string>& program) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> cmd = {mpirun, "-np", std::to_string(n)};
  if (!hosts.empty()) {
    cmd.push_back("--host");
    cmd.push_back(hosts);
  } else if (static_cast<unsigned long>(n) > cores) {
    cmd.push_back("--oversubscribe");
  }
  if (::geteuid() == 0) cmd.push_back("--allow-run-as-root");
  // Every rank reports its own exit status: mpirun does not kill the others at the first failure.
  // (Ember's communicator makes the others exit by themselves when a peer is gone; anything still
  // running kFailureGrace after a failure is ended by this launcher.)
  cmd.insert(cmd.end(), {"--mca", "orte_abort_on_non_zero_status", "0"});
  // OpenMPI binds each rank to a single core when np <= 2 (to a socket above): a rank given several
  // math threads below would run them all on that one core, and every job started with -n 1 on a
  // machine (the daemon's, say) on the same core 0; one rank per host of a two-host test on one
  // machine shared core 0 too. Ranks float, as torchrun's do, unless the user chose a binding.
  if (!std::getenv("OMPI_MCA_hwloc_base_binding_policy")) cmd.insert(cmd.end(), {"--bind-to", "none"});
  // Each rank one share of the cores for its math threads (unless the user chose).
  if (!std::getenv("OMP_NUM_THREADS")) {
    long per = std::max(1L, static_cast<long>(cores) / n);
    ::setenv("OMP_NUM_THREADS", std::to_string(per).c_str(), 1);
  }
  cmd.insert(cmd.end(), {"-x", "OMP_NUM_THREADS"});
  std::string self = fs::read_symlink("/proc/self/exe").string();
  cmd.insert(cmd.end(), {self, "launch", "--as-rank", "--status-dir", status_dir});
  if (rank0_only) cmd.push_back("--rank0-only");
  cmd.push_back("--");
  cmd.insert(cmd.end(), program.begin(), program.end());
  return cmd;
}

// To every local rank's wrapper, which passes it to its program; ranks on other nodes (no pid
// file here) hear it from mpirun, which ends the job on SIGINT/SIGTERM.
void signal_ranks(pid_t mpirun, long n, const std::string& status_dir, int sig) {
  int local = 0;
  for (long r = 0; r < n; ++r) {
    std::ifstream in(fs::path(status_dir) / ("pid" + std::to_string(r)));
    long wp = 0;
    if (in >> wp && wp > 0 && ::kill(static_cast<pid_t>(wp), sig) == 0) ++local;
  }
  if (local < n) ::kill(mpirun, sig);
}

// Rank r's exit status as its wrapper recorded it, or -1 when it has recorded none (yet, or it
// runs on another node).
int recorded_status(const std::string& status_dir, long r) {
  std::ifstream in(fs::path(status_dir) / ("rank" + std::to_string(r)));
  int code = -1;
  return in >> code ? code : -1;
}

// Waits for mpirun while forwarding signals, ending ranks that outlive a failure by kFailureGrace
// and killing a job still running kill_grace_seconds() after a forwarded signal. Returns mpirun's
// wait status.
int supervise(pid_t pid, long n, const std::string& status_dir) {
  using Clock = std::chrono::steady_clock;
  int status = 0;
  Clock::time_point failed_at{}, signalled_at{};
  bool ended = false, killed = false;
  // mpirun can miss a SIGTERM that arrives while it is still starting ranks, and then waits
  // forever: whatever still runs this long after a forwarded signal is killed.
  const double kill_after = kill_grace_seconds();
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  for (;;) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (g_pending) {
      int sig = g_pending;
      g_pending = 0;
      signal_ranks(pid, n, status_dir, sig);
      if (signalled_at == Clock::time_point{}) signalled_at = Clock::now();
    }
    if (!killed && signalled_at != Clock::time_point{} && since(signalled_at) > kill_after) {
      std::cerr << "ember launch: the job still runs " << kill_after << " s after the signal: killing it\n";
      signal_ranks(pid, n, status_dir, SIGKILL);
      ::kill(pid, SIGKILL);
      killed = true;
    }
    if (failed_at == Clock::time_point{}) {
      for (long r = 0; r < n; ++r)
        if (recorded_status(status_dir, r) > 0) failed_at = Clock::now();
    } else if (!ended && since(failed_at) > kFailureGrace) {
      std::cerr << "ember launch: a rank failed " << kFailureGrace << " s ago and others still run: ending them\n";
      signal_ranks(pid, n, status_dir, SIGTERM);
      ended = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return status;
}

// The worst exit status of the ranks (mpirun's own where some ranks left none here), with a line
// listing the failing ranks.
int worst_status(long n, const std::string& status_dir, int mpirun_status) {
  int worst = 0, seen = 0;
  std::string failures;
  for (long r = 0; r < n; ++r) {
    const int code = recorded_status(status_dir, r);
    if (code < 0) continue;
    ++seen;
    if (code != 0) failures += " rank " + std::to_string(r) + ": " + std::to_string(code) + ";";
    worst = std::max(worst, code);
  }
  // Ranks on other nodes leave no status file here: then mpirun's own status counts too.
  if (seen < n) worst = std::max(worst, status_code(mpirun_status));
  if (worst != 0) {
    if (!failures.empty()) failures.pop_back();
    std::cerr << "ember launch: " << (failures.empty() ? "mpirun failed" : "exit status by rank:" + failures)
              << "; returning " << worst << "\n";
  }
  return worst;
}

int launch_ranks(long n, const std::string& hosts, bool rank0_only, const std::string& mpirun_flag, bool dry_run,
                 const std::vector<std::string>& program) {
  std::string mpirun = find_in_path(mpirun_flag.empty() ? "mpirun" : mpirun_flag);
  EMBER_CHECK(!mpirun.empty(), "'", mpirun_flag.empty() ? "mpirun" : mpirun_flag,
              "' was not found in PATH (Debian: apt-get install openmpi-bin)");
  char tmpl[] = "/tmp/ember-launch-XXXXXX";
  std::string status_dir = dry_run ? "/tmp/ember-launch-dry-run" : (::mkdtemp(tmpl) ? tmpl : "");
  std::vector<std::string> cmd = mpirun_command(mpirun, n, hosts, rank0_only, status_dir, program);
  if (dry_run) {
    for (size_t i = 0; i < cmd.size(); ++i) std::cout << (i ? " " : "") << cmd[i];
    std::cout << "\n";
    return 0;
  }
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  pid_t pid = ::fork();
  EMBER_CHECK(pid >= 0, "ember launch: fork failed: ", std::strerror(errno));
  if (pid == 0) {
    auto argv = c_args(cmd);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "ember launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    std::_Exit(127);
  }
  g_child = pid;
  install(note_signal);
  const int status = supervise(pid, n, status_dir);
  g_child = 0;
  const int worst = worst_status(n, status_dir, status);
  std::error_code ec;
  fs::remove_all(status_dir, ec);
  return worst;
}

}  // namespace

int launch(const std::vector<std::string>& all_args) {
  auto dash = std::find(all_args.begin(), all_args.end(), "--");
  std::vector<std::string> args(all_args.begin(), dash);
  std::vector<std::string> program(dash == all_args.end() ? dash : dash + 1, all_args.end());
  Flags f;
  f.add("n", "N", "number of ranks")
      .add("hosts", "H1:S1,H2:S2", "run on these hosts with these slots (mpirun --host); default: this machine")
      .add("rank0-only", "", "show only rank 0's standard output (every rank's errors are still shown)")
      .add("mpirun", "PATH", "the MPI launcher (default: mpirun from PATH)")
      .add("dry-run", "", "print the mpirun command instead of running it")
      .add("help", "", "show this help")
      .add_internal("as-rank", "")         // the per-rank wrapper that mpirun starts
      .add_internal("status-dir", "DIR");  // where that wrapper records its exit status
  const std::string usage = usage_of(
      "ember launch -n N [--hosts H1:S1,...] [--rank0-only] -- PROGRAM [ARGS...]\n\n"
      "Starts N ranks of PROGRAM through mpirun (see docs/DISTRIBUTED.md) and returns the worst exit\n"
      "status of the ranks. Example: ember launch -n 2 -- build/examples/mnist_cnn --data-parallel",
      f);
  return run_leaf("ember launch", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    if (program.empty()) throw UsageError("expected '-- PROGRAM [ARGS...]' after the flags");
    if (f.has("as-rank")) return run_as_rank(f.str("status-dir"), f.has("rank0-only"), program);
    // An elastic job (docs/scheduler/elastic.md): the daemon says how many ranks this run has.
    const char* elastic = std::getenv("EMBER_ELASTIC_RANKS");
    if (!f.has("n") && !elastic) throw UsageError("-n N (the number of ranks) is required");
    char* end = nullptr;
    long n = f.has("n") ? f.integer("n", 1, 1, 100000) : std::strtol(elastic, &end, 10);
    if (!f.has("n") && (!*elastic || *end || n < 1 || n > 100000))
      throw UsageError(std::string("EMBER_ELASTIC_RANKS: expected a number of ranks 1..100000, got '") + elastic + "'");
    if (f.has("hosts")) check_hosts(n, parse_hosts(f.str("hosts")));
    if (f.has("mpirun") && f.str("mpirun").empty()) throw UsageError("--mpirun: expected a program, got ''");
    return launch_ranks(n, f.str("hosts"), f.has("rank0-only"), f.str("mpirun"), f.has("dry-run"), program);
  });
}

}  // namespace ember::tools
