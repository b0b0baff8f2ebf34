#include "scheduler/daemon/supervisor.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ember::sched {
namespace {

// Async-signal-safe enough for a freshly forked single-threaded child: plain syscalls only.
void write_small_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = ::write(fd, text.data(), text.size());
  ::fsync(fd);
  ::close(fd);
  if (w == static_cast<ssize_t>(text.size())) ::rename(tmp.c_str(), path.c_str());
}

void close_inherited_fds() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
  long max = ::sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (max > 0 ? max : 1024); ++fd) ::close(static_cast<int>(fd));
}

[[noreturn]] void run_job(const Launch& l, const sigset_t& old_mask) {
  // O_NOFOLLOW: the log's folder is the daemon's, but a link there must never redirect a write.
  int log = ::open(l.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
  int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  if (log >= 0) {
    ::dup2(log, 1);
    ::dup2(log, 2);
  }
  ::umask(l.umask);
  if (l.run_as && !become(*l.run_as)) {
    std::fprintf(stderr, "ember sched: cannot run the job as user %s (uid %u): %s\n", l.run_as->name.c_str(),
                 static_cast<unsigned>(l.run_as->uid), std::strerror(errno));
    _exit(126);
  }
  if (!l.workdir.empty() && ::chdir(l.workdir.c_str()) != 0) {
    std::fprintf(stderr, "ember sched: cannot enter working directory %s: %s\n", l.workdir.c_str(),
                 std::strerror(errno));
    _exit(127);
  }
  if (!l.cores.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : l.cores) CPU_SET(c, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
      std::fprintf(stderr, "ember sched: warning: cannot pin to the device's cores: %s\n", std::strerror(errno));
  }
  for (const auto& [k, v] : l.env) ::setenv(k.c_str(), v.c_str(), 1);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT}) ::signal(s, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(l.command.c_str()));
  for (const std::string& a : l.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execvp(l.command.c_str(), argv.data());
  std::fprintf(stderr, "ember sched: cannot run %s: %s\n", l.command.c_str(), std::strerror(errno));
  _exit(127);
}

}  // namespace

int exit_code_of(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return 255;
}

pid_t spawn_supervised(const Launch& l) {
  // Block the stop signals before forking: the supervisor must never die of the SIGTERM meant
  // for its job (it would leave no exit status), and the job unblocks them before exec.
  sigset_t block, old;
  sigemptyset(&block);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&block, s);
  std::fflush(nullptr);  // else the child would write the daemon's buffered output a second time
  ::sigprocmask(SIG_BLOCK, &block, &old);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    EMBER_FAIL("scheduler: cannot fork a job supervisor: ", std::strerror(e));
  }
  if (pid > 0) {
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return pid;
  }
  // The supervisor.
  ::setsid();
  close_inherited_fds();
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT}) ::signal(s, SIG_DFL);
  write_small_file_atomic(l.pid_path, std::to_string(::getpid()) + "\n");
  pid_t child = ::fork();
  if (child < 0) {
    write_small_file_atomic(l.exit_path, "127\n");
    _exit(127);
  }
  if (child == 0) run_job(l, old);
  // A stop signal that reached the supervisor before the job existed (sent to the group before
  // the job was forked, or to the supervisor itself before setsid) is pending here, blocked: pass
  // it on. A signal sent to the group after the fork reaches the job directly as well; the job
  // may then see it twice, which stop handlers take as one.
  sigset_t pending;
  if (::sigpending(&pending) == 0)
    for (int s : {SIGTERM, SIGINT, SIGHUP})
      if (sigismember(&pending, s)) ::kill(child, s);
  int st = 0;
  while (::waitpid(child, &st, 0) < 0 && errno == EINTR) {
  }
  int code = exit_code_of(st);
  write_small_file_atomic(l.exit_path, std::to_string(code) + "\n");
  _exit(code & 0xff);
}

uint64_t process_start_time(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  if (!f) return 0;
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  size_t rp = s.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream is(s.substr(rp + 2));
  std::string state;
  is >> state;
  if (state == "Z" || state == "X") return 0;
  std::string skip;
  for (int i = 4; i < 22; ++i) is >> skip;  // fields 4..21
  uint64_t start = 0;
  is >> start;
  return start;
}

bool process_alive(pid_t pid, uint64_t start) {
  uint64_t s = process_start_time(pid);
  return s != 0 && (start == 0 || s == start);
}

bool signal_group(pid_t pgid, int sig) {
  if (pgid <= 0) return false;
  if (::kill(-pgid, sig) == 0) return true;
  // A supervisor forked a moment ago may not have made its process group yet (it is still in the
  // daemon's): it gets the signal itself, blocked, and passes a stop on to the job it starts.
  // Without this a preemption decided right after a start was lost, and the job was killed
  // without a checkpoint when the grace period ran out.
  return errno == ESRCH && ::getpgid(pgid) == ::getpgid(0) && ::kill(pgid, sig) == 0;
}

std::optional<int> read_exit_file(const std::string& path) {
  std::ifstream f(path);
  int code;
  if (f >> code) return code;
  return std::nullopt;
}

std::optional<pid_t> read_pid_file(const std::string& path) {
  std::ifstream f(path);
  long pid;
  if (f >> pid && pid > 0) return static_cast<pid_t>(pid);
  return std::nullopt;
}

std::string find_program(const std::string& command, const std::string& workdir, const std::string& path_env) {
  namespace fs = std::filesystem;
  auto ok = [](const fs::path& p) { return ::access(p.c_str(), X_OK) == 0 && !fs::is_directory(p); };
  if (command.find('/') != std::string::npos) {
    fs::path p = fs::path(command).is_absolute() || workdir.empty() ? fs::path(command) : fs::path(workdir) / command;
    return ok(p) ? p.string() : std::string();
  }
  std::stringstream ss(path_env);
  for (std::string dir; std::getline(ss, dir, ':');) {
    fs::path p = fs::path(dir.empty() ? "." : dir) / command;
    if (ok(p)) return p.string();
  }
  return {};
}

}  // namespace ember::sched
