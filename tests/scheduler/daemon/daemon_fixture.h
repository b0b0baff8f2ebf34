// What the daemon's tests share: a fixture that starts `ember sched serve` in a fresh folder and
// talks to it, shell jobs held by gate files, sched_trainer jobs (a small training job that
// checkpoints and handles SIGTERM), and a runner for the command-line clients. Waits poll with a
// deadline; nothing asserts on time.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "scheduler/daemon/identity.h"
#include "scheduler/daemon/wire.h"
#include "scheduler/policy.h"

namespace daemon_test {

namespace fs = std::filesystem;
using ember::proto::JobInfo;
using ember::proto::JobSpec;
using ember::proto::Request;
using ember::proto::Response;

constexpr double kTimeout = 60;  // seconds any one wait may take on a loaded machine

inline std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Polls `pred` every 20 ms until it holds or the deadline passes.
inline bool wait_for(const std::function<bool()>& pred, double timeout_s = kTimeout) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr
};

// Runs argv to completion (it must end within the deadline, else it is killed).
inline Result run(const std::vector<std::string>& argv, const std::string& cwd = "") {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) _exit(126);
    std::vector<char*> a;
    for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    _exit(127);
  }
  ::close(p[1]);
  ::fcntl(p[0], F_SETFL, O_NONBLOCK);
  Result r;
  int st = 0;
  bool done = wait_for([&] {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
    return ::waitpid(pid, &st, WNOHANG) == pid;
  });
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    ADD_FAILURE() << "command did not finish: " << argv[0];
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0) r.out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/esd-XXXXXX";  // short: a Unix socket path has ~107 bytes
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    state_ = dir_ + "/state";
  }

  void TearDown() override {
    // Whatever still runs goes: jobs (their whole process groups), then the daemon.
    try {
      Request q;
      q.mutable_status()->set_all(true);
      Response all = ember::sched::call_daemon(state_, q, 5);
      for (const JobInfo& j : all.jobs())
        if (j.pid() > 0) ::kill(-static_cast<pid_t>(j.pid()), SIGKILL);
    } catch (...) {
    }
    for (pid_t g : extra_groups_) ::kill(-g, SIGKILL);
    kill_daemon();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // `as`: run the daemon as that user rather than as the test's.
  void start_daemon(const std::vector<std::string>& extra, const ember::sched::Identity* as = nullptr) {
    std::vector<std::string> argv = {EMBER_EXE, "sched", "serve", "--state", state_};
    if (std::find(extra.begin(), extra.end(), "--grace") == extra.end()) argv.insert(argv.end(), {"--grace", "10"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = ::fork();
    if (daemon_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed by ctest takes its daemon along
      int fd = ::open((dir_ + "/daemon.out").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      if (as && !ember::sched::become(*as)) _exit(126);
      std::vector<char*> a;
      for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      _exit(127);
    }
    ASSERT_TRUE(wait_for([&] {
      try {
        status();
        return true;
      } catch (...) {
        int st;
        if (::waitpid(daemon_, &st, WNOHANG) == daemon_) {
          daemon_ = -1;
          return true;  // it died: the assertion below says so
        }
        return false;
      }
    })) << "daemon did not come up";
    ASSERT_GT(daemon_, 0) << "daemon exited: " << read_file(dir_ + "/daemon.out");
  }

  // Starts the daemon on GPUs that a fake nvidia-smi (first on PATH for the daemon only) lists,
  // one "index, MiB" line each.
  void start_daemon_on_fake_gpus(const std::vector<std::string>& gpus, const std::vector<std::string>& extra) {
    fs::create_directories(dir_ + "/bin");
    std::string script = "#!/bin/sh\n";
    for (const std::string& g : gpus) script += "echo '" + g + "'\n";
    write_file(dir_ + "/bin/nvidia-smi", script);
    fs::permissions(dir_ + "/bin/nvidia-smi", fs::perms::owner_all);
    const char* path = std::getenv("PATH");
    const std::string saved = path ? path : "/usr/bin:/bin";
    ::setenv("PATH", (dir_ + "/bin:" + saved).c_str(), 1);
    start_daemon(extra);
    ::setenv("PATH", saved.c_str(), 1);
  }

  void kill_daemon() {
    if (daemon_ <= 0) return;
    ::kill(daemon_, SIGKILL);
    ::waitpid(daemon_, nullptr, 0);
    daemon_ = -1;
  }

  Response status() {
    Request q;
    q.mutable_status()->set_all(true);
    return ember::sched::call_daemon(state_, q, 10);
  }

  JobInfo job(int64_t id) {
    Response st = status();
    for (const JobInfo& j : st.jobs())
      if (j.id() == id) return j;
    ADD_FAILURE() << "no job " << id;
    return {};
  }

  bool finished(int64_t id) {
    auto s = job(id).state();
    return s == ember::proto::DONE || s == ember::proto::FAILED || s == ember::proto::CANCELLED;
  }

  int64_t submit(const JobSpec& spec) {
    Request q;
    *q.mutable_submit()->mutable_spec() = spec;
    Response r = ember::sched::call_daemon(state_, q, 10);
    if (!r.ok()) throw std::runtime_error("submit failed: " + r.error());  // ends the test
    return r.job();
  }

  // A shell job that waits for the file `gate` (in the test folder), then prints `msg`.
  // Shell that waits for the file `gate`; it gives up (status 9) when the test folder is gone or
  // after about two minutes, so that a test killed by ctest leaves no job behind for long.
  std::string wait_gate(const std::string& gate) {
    return "n=0; while [ ! -e " + dir_ + "/" + gate + " ]; do [ -d " + dir_ +
           " ] || exit 9; n=$((n+1)); [ $n -gt 6000 ] && exit 9; sleep 0.02; done";
  }

  JobSpec gated(const std::string& name, int devices, const std::string& gate) {
    JobSpec s;
    s.set_name(name);
    s.set_command("/bin/sh");
    s.add_args("-c");
    s.add_args(
        "echo devices=$EMBER_DEVICES threads=$OMP_NUM_THREADS cuda=[$CUDA_VISIBLE_DEVICES]; "
        "grep Cpus_allowed_list /proc/self/status; " +
        wait_gate(gate) + "; echo finished " + name);
    s.set_devices(devices);
    s.set_workdir(dir_);
    return s;
  }

  JobSpec trainer(const std::string& name, int steps, const std::string& gate, int gate_step) {
    JobSpec s;
    s.set_name(name);
    s.set_command(SCHED_TRAINER_EXE);
    std::vector<std::string> args = {"--steps",
                                     std::to_string(steps),
                                     "--checkpoint-every",
                                     "4",
                                     "--checkpoint-dir",
                                     dir_ + "/ckpt-" + name,
                                     "--resume",
                                     "auto",
                                     "--out",
                                     dir_ + "/" + name + ".txt"};
    if (!gate.empty()) args.insert(args.end(), {"--gate", dir_ + "/" + gate, "--gate-step", std::to_string(gate_step)});
    for (const std::string& a : args) s.add_args(a);
    s.set_checkpoint_dir(dir_ + "/ckpt-" + name);
    s.set_workdir(dir_);
    return s;
  }

  // The parameters of an uninterrupted run, from the trainer run directly.
  std::string reference(int steps) {
    std::string out = dir_ + "/reference.txt";
    Result r = run({SCHED_TRAINER_EXE, "--steps", std::to_string(steps), "--out", out});
    EXPECT_EQ(r.status, 0) << r.out;
    return read_file(out);
  }

  Result cli(std::vector<std::string> args) {
    args.insert(args.begin(), {EMBER_EXE, "sched"});
    args.insert(args.begin() + 3, {"--state", state_});
    return run(args, dir_);
  }

  std::string log_of(int64_t id) { return read_file(job(id).log_path()); }

  std::string dir_, state_;
  pid_t daemon_ = -1;
  std::vector<pid_t> extra_groups_;
};

}  // namespace daemon_test
