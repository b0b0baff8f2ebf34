// The scheduler daemon with real processes on CPU virtual devices: `ember sched serve` as the
// daemon, its clients, shell jobs held by gate files, and sched_trainer (a small training job that
// checkpoints and handles SIGTERM). Waits poll with a deadline; nothing asserts on time.
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

#include "scheduler/daemon/wire.h"
#include "scheduler/policy.h"

namespace fs = std::filesystem;
using ember::proto::JobInfo;
using ember::proto::JobSpec;
using ember::proto::Request;
using ember::proto::Response;

namespace {

constexpr double kTimeout = 60;  // seconds any one wait may take on a loaded machine

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Polls `pred` every 20 ms until it holds or the deadline passes.
bool wait_for(const std::function<bool()>& pred, double timeout_s = kTimeout) {
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
Result run(const std::vector<std::string>& argv, const std::string& cwd = "") {
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

  void start_daemon(const std::vector<std::string>& extra) {
    std::vector<std::string> argv = {EMBER_EXE, "sched", "serve", "--state", state_};
    if (std::find(extra.begin(), extra.end(), "--grace") == extra.end()) argv.insert(argv.end(), {"--grace", "10"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = ::fork();
    if (daemon_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed by ctest takes its daemon along
      int fd = ::open((dir_ + "/daemon.out").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
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

std::string names(const JobInfo& j) {
  std::string s;
  for (const std::string& d : j.device_names()) s += (s.empty() ? "" : ",") + d;
  return s;
}

TEST_F(DaemonTest, StrictFcfsKeepsTheSmallJobBehindTheWideOne) {
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs"});
  int64_t a = submit(gated("a", 1, "gate"));
  int64_t b = submit(gated("b", 2, "gate"));
  int64_t c = submit(gated("c", 1, "gate"));
  // Decisions are made before submit answers, so this is the state, not a race.
  EXPECT_EQ(job(a).state(), ember::proto::RUNNING);
  EXPECT_EQ(names(job(a)), "cpu0");
  EXPECT_EQ(job(b).state(), ember::proto::QUEUED);
  EXPECT_EQ(job(c).state(), ember::proto::QUEUED) << "strict FCFS: c fits on cpu1 but must not pass b";
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a) && finished(b) && finished(c); }));
  JobInfo ja = job(a), jb = job(b), jc = job(c);
  for (const JobInfo& j : {ja, jb, jc}) EXPECT_EQ(j.state(), ember::proto::DONE) << j.reason();
  EXPECT_LE(ja.finish_time(), jb.first_start());
  EXPECT_LE(jb.finish_time(), jc.first_start()) << "c needs one of b's devices";
  EXPECT_NE(log_of(b).find("devices=cpu0,cpu1 threads=2 cuda=[]"), std::string::npos) << log_of(b);
  EXPECT_NE(log_of(c).find("finished c"), std::string::npos);
}

TEST_F(DaemonTest, PriorityPolicyLetsTheSmallJobUseTheFreeDevice) {
  start_daemon({"--devices", "cpu:2", "--policy", "priority"});
  int64_t a = submit(gated("a", 1, "gate"));
  int64_t b = submit(gated("b", 2, "gate"));
  int64_t c = submit(gated("c", 1, "gate"));
  EXPECT_EQ(job(a).state(), ember::proto::RUNNING);
  EXPECT_EQ(job(b).state(), ember::proto::QUEUED);
  JobInfo jc = job(c);
  EXPECT_EQ(jc.state(), ember::proto::RUNNING) << "non-strict policies fill the free device";
  EXPECT_EQ(names(jc), "cpu1");
  // Each job is pinned to its device's cores and told its devices.
  Response st = status();
  ASSERT_EQ(st.devices_size(), 2);
  ASSERT_TRUE(wait_for([&] { return log_of(c).find("Cpus_allowed_list") != std::string::npos; }));
  std::string cores;
  for (int core : st.devices(1).cores()) cores += (cores.empty() ? "" : ",") + std::to_string(core);
  EXPECT_NE(log_of(c).find("devices=cpu1 threads=1 cuda=[]"), std::string::npos) << log_of(c);
  EXPECT_NE(log_of(c).find("Cpus_allowed_list:\t" + cores + "\n"), std::string::npos) << log_of(c);
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a) && finished(b) && finished(c); }));
  EXPECT_LT(job(c).first_start(), job(b).first_start());
  EXPECT_EQ(job(b).state(), ember::proto::DONE);
  EXPECT_EQ(job(b).exit_code(), 0);
}

TEST_F(DaemonTest, CancelQueuedAndRunningJobs) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  int64_t a = submit(gated("a", 1, "never"));
  int64_t b = submit(gated("b", 1, "never"));
  ASSERT_EQ(job(a).state(), ember::proto::RUNNING);
  Result r = cli({"cancel", "--job", std::to_string(b)});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(job(b).state(), ember::proto::CANCELLED);
  EXPECT_EQ(job(b).attempts(), 0);
  r = cli({"cancel", "--job", std::to_string(a)});
  EXPECT_EQ(r.status, 0) << r.out;
  ASSERT_TRUE(wait_for([&] { return finished(a); }));
  EXPECT_EQ(job(a).state(), ember::proto::CANCELLED);
  EXPECT_EQ(job(a).exit_code(), 128 + SIGTERM);
  r = cli({"cancel", "--job", std::to_string(a)});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("has already ended (cancelled)"), std::string::npos) << r.out;
  r = cli({"cancel", "--job", "99"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("no job 99"), std::string::npos) << r.out;
  EXPECT_EQ(status().devices(0).job(), -1) << "the device is free again";
}

TEST_F(DaemonTest, AJobThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs", "--grace", "0.2"});
  JobSpec s = gated("stubborn", 1, "never");
  s.set_args(1, "trap '' TERM; echo trapped; " + s.args(1));
  int64_t id = submit(s);
  ASSERT_TRUE(wait_for([&] { return log_of(id).find("trapped") != std::string::npos; }));
  Result r = cli({"cancel", "--job", std::to_string(id)});
  EXPECT_EQ(r.status, 0) << r.out;
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  JobInfo j = job(id);
  EXPECT_EQ(j.state(), ember::proto::CANCELLED);
  EXPECT_EQ(j.exit_code(), 128 + SIGKILL) << j.reason();
  EXPECT_EQ(status().devices(0).job(), -1);
}

TEST_F(DaemonTest, PreemptedJobResumesFromItsCheckpointWithIdenticalParameters) {
  const std::string want = reference(20);
  // LAS with a tiny first queue: a job that has run 0.05 device-seconds yields to a newcomer.
  start_daemon({"--devices", "cpu:1", "--policy", "las", "--set", "las.thresholds=0.05", "--set", "las.promote=0"});
  int64_t a = submit(trainer("long", 20, "gate", 10));
  ASSERT_TRUE(wait_for([&] {
    JobInfo j = job(a);
    return j.run_seconds() > 0.1 && log_of(a).find("waiting for gate at step 10") != std::string::npos;
  }));
  int64_t b = submit(trainer("short", 3, "", -1));
  ASSERT_TRUE(wait_for([&] { return job(a).preemptions() == 1; }));
  ASSERT_TRUE(wait_for([&] { return finished(b); }));
  EXPECT_EQ(job(b).state(), ember::proto::DONE) << job(b).reason();
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a); }));
  JobInfo ja = job(a);
  EXPECT_EQ(ja.state(), ember::proto::DONE) << ja.reason();
  EXPECT_EQ(ja.attempts(), 2);
  EXPECT_EQ(ja.restarts(), 0) << "a preemption is not a failure";
  EXPECT_LT(job(b).finish_time(), ja.finish_time());
  std::string log = log_of(a);
  EXPECT_NE(log.find("preempted at step 10"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from step 10"), std::string::npos) << log;
  EXPECT_EQ(read_file(dir_ + "/long.txt"), want) << "resumed run differs from the uninterrupted one";
}

TEST_F(DaemonTest, DaemonKilledAndRestartedLosesNoJob) {
  const std::string want = reference(12);
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs"});
  int64_t a = submit(gated("a", 1, "gate"));
  int64_t t = submit(trainer("train", 12, "gate2", 9));
  int64_t q = submit(gated("q", 2, "gate"));
  ASSERT_TRUE(wait_for([&] { return log_of(t).find("waiting for gate at step 9") != std::string::npos; }));
  const int64_t a_pid = job(a).pid(), t_pid = job(t).pid();
  ASSERT_GT(a_pid, 0);
  ASSERT_GT(t_pid, 0);
  extra_groups_ = {static_cast<pid_t>(a_pid), static_cast<pid_t>(t_pid)};
  kill_daemon();
  // While no daemon watches: `a` keeps running, `train` dies without a word (its last checkpoint
  // is at step 8).
  ASSERT_EQ(::kill(-static_cast<pid_t>(t_pid), SIGKILL), 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(a_pid), 0), 0) << "a job died with its daemon";
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs"});
  JobInfo ja = job(a);
  EXPECT_EQ(ja.state(), ember::proto::RUNNING);
  EXPECT_EQ(ja.pid(), a_pid) << "re-adopted, not restarted";
  EXPECT_EQ(ja.attempts(), 1);
  EXPECT_EQ(job(q).state(), ember::proto::QUEUED);
  ASSERT_TRUE(wait_for([&] { return job(t).attempts() == 2; })) << "requeued and started again";
  EXPECT_EQ(job(t).preemptions(), 1);
  write_file(dir_ + "/gate", "");
  write_file(dir_ + "/gate2", "");
  ASSERT_TRUE(wait_for([&] { return finished(a) && finished(t) && finished(q); }));
  EXPECT_EQ(job(a).state(), ember::proto::DONE) << job(a).reason();
  EXPECT_EQ(job(a).exit_code(), 0) << "the re-adopted job's exit status comes from its supervisor's file";
  EXPECT_EQ(job(q).state(), ember::proto::DONE) << job(q).reason();
  EXPECT_EQ(job(t).state(), ember::proto::DONE) << job(t).reason();
  EXPECT_NE(log_of(t).find("resumed from step 8"), std::string::npos) << log_of(t);
  EXPECT_EQ(read_file(dir_ + "/train.txt"), want);
}

TEST_F(DaemonTest, DrainWithPreemptionKeepsJobsForTheNextDaemon) {
  const std::string want = reference(8);
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  int64_t t = submit(trainer("t", 8, "gate", 5));
  int64_t q = submit(gated("q", 1, "gate"));
  ASSERT_TRUE(wait_for([&] { return log_of(t).find("waiting for gate at step 5") != std::string::npos; }));
  Result r = cli({"drain", "--preempt", "--wait"});
  EXPECT_EQ(r.status, 0) << r.out;
  int st = 0;
  ASSERT_EQ(::waitpid(daemon_, &st, 0), daemon_);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  daemon_ = -1;
  write_file(dir_ + "/gate", "");
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  ASSERT_TRUE(wait_for([&] { return finished(t) && finished(q); }));
  EXPECT_EQ(job(t).state(), ember::proto::DONE) << job(t).reason();
  EXPECT_EQ(job(t).preemptions(), 1);
  EXPECT_NE(log_of(t).find("resumed from step 5"), std::string::npos) << log_of(t);
  EXPECT_EQ(read_file(dir_ + "/t.txt"), want);
  EXPECT_EQ(job(q).state(), ember::proto::DONE);
}

TEST_F(DaemonTest, BadSpecsAndImpossibleJobsAreRejectedWithTheReason) {
  start_daemon({"--devices", "cpu:2", "--cpu-mem", "4", "--policy", "fcfs", "--max-queued", "1"});
  auto submit_spec = [&](const std::string& text) {
    write_file(dir_ + "/spec.pbtxt", text);
    return cli({"submit", "--spec", dir_ + "/spec.pbtxt"});
  };
  Result r = submit_spec("name: \"x\"\ncommand: \"/bin/true\"\ngpus: 2\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("spec.pbtxt:3:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"gpus\""), std::string::npos) << r.out;
  r = submit_spec("name: \"x\"\nargs: \"-c\"\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("no command"), std::string::npos) << r.out;
  r = submit_spec("command: \"/bin/true\"\ndevices: 64\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("can never run here: it needs 64 devices and the pool has 2"), std::string::npos) << r.out;
  r = submit_spec("command: \"/bin/true\"\nmemory_gib: 16\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("with 16 GiB each and the largest device has 4 GiB"), std::string::npos) << r.out;
  r = submit_spec("command: \"/bin/true\"\ndevices: 0\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("devices must be a whole number >= 1"), std::string::npos) << r.out;
  r = submit_spec("command: \"./no-such-program\"\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("is not an executable file"), std::string::npos) << r.out;
  r = cli({"submit"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("nothing to run"), std::string::npos) << r.out;
  EXPECT_EQ(status().jobs_size(), 0) << "nothing was queued";
  // The bound on queued work: one running, one queued, the next refused.
  submit(gated("a", 2, "gate"));
  submit(gated("b", 2, "gate"));
  r = cli({"submit", "--devices", "1", "--", "/bin/true"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("the queue is full: 1 job(s) waiting"), std::string::npos) << r.out;
  write_file(dir_ + "/gate", "");
}

TEST_F(DaemonTest, ExitStatusesDecideWhatComesNext) {
  start_daemon({"--devices", "cpu:2", "--policy", "fcfs"});
  auto shell = [&](const std::string& name, const std::string& script, int max_restarts) {
    JobSpec s;
    s.set_name(name);
    s.set_command("/bin/sh");
    s.add_args("-c");
    s.add_args(script);
    s.set_workdir(dir_);
    s.set_max_restarts(max_restarts);
    return submit(s);
  };
  int64_t failing = shell("failing", "exit 3", 2);
  // Exits 75 once (as a job that checkpointed on its own would), then succeeds.
  int64_t again = shell("again", "if [ -e marker ]; then exit 0; fi; touch marker; exit 75", 0);
  ASSERT_TRUE(wait_for([&] { return finished(failing) && finished(again); }));
  JobInfo f = job(failing);
  EXPECT_EQ(f.state(), ember::proto::FAILED);
  EXPECT_EQ(f.exit_code(), 3);
  EXPECT_EQ(f.restarts(), 2);
  EXPECT_EQ(f.attempts(), 3);
  EXPECT_NE(f.reason().find("no restarts left"), std::string::npos) << f.reason();
  JobInfo a = job(again);
  EXPECT_EQ(a.state(), ember::proto::DONE) << a.reason();
  EXPECT_EQ(a.preemptions(), 1);
  EXPECT_EQ(a.restarts(), 0) << "exit 75 is a preemption, not a failure";
  EXPECT_EQ(a.attempts(), 2);
}

// GPUs without a GPU: a stand-in nvidia-smi on the daemon's PATH lists three devices; a job sees
// its GPUs in CUDA_VISIBLE_DEVICES in nvidia-smi's (PCI bus) numbering.
TEST_F(DaemonTest, GpuJobsSeeTheirDevicesInCudaVisibleDevices) {
  fs::create_directories(dir_ + "/bin");
  write_file(dir_ + "/bin/nvidia-smi", "#!/bin/sh\necho '0, 81559'\necho '1, 40960'\necho '2, 81559'\n");
  fs::permissions(dir_ + "/bin/nvidia-smi", fs::perms::owner_all);
  const char* path = std::getenv("PATH");
  const std::string saved = path ? path : "/usr/bin:/bin";
  ::setenv("PATH", (dir_ + "/bin:" + saved).c_str(), 1);
  start_daemon({"--devices", "gpu", "--policy", "fcfs"});
  ::setenv("PATH", saved.c_str(), 1);
  JobSpec s;
  s.set_name("big");
  s.set_command("/bin/sh");
  s.add_args("-c");
  s.add_args("echo cuda=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER devices=$EMBER_DEVICES");
  s.set_devices(2);
  s.set_memory_gib(60);
  s.set_workdir(dir_);
  int64_t big = submit(s);
  ASSERT_TRUE(wait_for([&] { return finished(big); }));
  EXPECT_EQ(job(big).state(), ember::proto::DONE) << job(big).reason();
  EXPECT_NE(log_of(big).find("cuda=0,2 order=PCI_BUS_ID devices=gpu0,gpu2"), std::string::npos) << log_of(big);
  s.set_devices(1);
  s.set_memory_gib(100);
  Request q;
  *q.mutable_submit()->mutable_spec() = s;
  Response r = ember::sched::call_daemon(state_, q, 10);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("with 100 GiB each and the largest device has 79.6"), std::string::npos) << r.error();
}

// Every policy the simulator has drives the live daemon too: a mix of gang sizes, with and
// without estimates, all runs to completion.
class EveryPolicy : public DaemonTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(EveryPolicy, RunsAMixOfJobsToCompletion) {
  start_daemon({"--devices", "cpu:2", "--policy", GetParam()});
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    std::string name = "j";  // (not "j" + to_string: GCC 12 warns falsely on that)
    name += std::to_string(i);
    JobSpec s = gated(name, i % 3 == 1 ? 2 : 1, "gate");
    if (i % 2 == 0) s.set_expected_seconds(10 + i);
    s.set_priority(i % 3);
    ids.push_back(submit(s));
  }
  EXPECT_EQ(job(ids[0]).state(), ember::proto::RUNNING) << "an idle pool starts the first job at once";
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] {
    for (int64_t id : ids)
      if (!finished(id)) return false;
    return true;
  }));
  for (int64_t id : ids)
    EXPECT_EQ(job(id).state(), ember::proto::DONE) << GetParam() << " job " << id << ": " << job(id).reason();
}

INSTANTIATE_TEST_SUITE_P(Daemon, EveryPolicy, ::testing::ValuesIn(ember::sched::policy_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

// The learned policy end to end: a tiny policy trained on the 60-job trace by `ember sched
// train-policy` drives the daemon, which feeds it finished jobs, until every job is done.
TEST_F(DaemonTest, APolicyTrainedOnTheSixtyJobTraceRunsTheDaemon) {
  const std::string trace =
      (fs::path(__FILE__).parent_path() / "../../../../shared/data/traces/tiresias_60_job.csv").lexically_normal();
  if (!fs::exists(trace)) GTEST_SKIP() << "no " << trace;
  const std::string net = dir_ + "/policy.ckpt";
  Result t = run({EMBER_EXE, "sched", "train-policy", "--trace", trace, "--out", net, "--gpus", "8", "--window", "20",
                  "--rollouts", "2", "--iterations", "2", "--eval-every", "1", "--train-until", "1e9"});
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("wrote " + net), std::string::npos) << t.out;
  start_daemon({"--devices", "cpu:2", "--policy", "learned:" + net});
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    std::string name = "l";
    name += std::to_string(i);
    ids.push_back(submit(gated(name, i % 2 + 1, "gate")));
  }
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] {
    for (int64_t id : ids)
      if (!finished(id)) return false;
    return true;
  }));
  for (int64_t id : ids) EXPECT_EQ(job(id).state(), ember::proto::DONE) << "job " << id << ": " << job(id).reason();
  // A file that is not a policy network is refused before the daemon starts.
  write_file(dir_ + "/bogus.ckpt", "not a checkpoint");
  Result bad =
      run({EMBER_EXE, "sched", "serve", "--state", dir_ + "/state2", "--policy", "learned:" + dir_ + "/bogus.ckpt"});
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("bogus.ckpt"), std::string::npos) << bad.out;
}

TEST_F(DaemonTest, CommandLineClientsShowQueueStatusAndLogs) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  Result r = cli({"submit", "--name", "hello", "--", "/bin/sh", "-c", "echo hello from $EMBER_JOB_ID"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("submitted job 1 (hello)"), std::string::npos) << r.out;
  ASSERT_TRUE(wait_for([&] { return finished(1); }));
  r = cli({"logs", "--job", "1"});
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("hello from 1"), std::string::npos) << r.out;
  r = cli({"status", "--all"});
  EXPECT_NE(r.out.find("hello"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("done"), std::string::npos) << r.out;
  r = cli({"status", "--job", "1"});
  EXPECT_NE(r.out.find("last exit:   0"), std::string::npos) << r.out;
  // Every transition is in the database and shows in the job's history.
  EXPECT_NE(r.out.find(" queued submitted\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" running starting attempt 1 on cpu0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" done exit 0\n"), std::string::npos) << r.out;
  r = cli({"submit", "--name", "waits", "--", "/bin/sh", "-c", wait_gate("gate")});
  r = cli({"queue"});
  EXPECT_NE(r.out.find("waits"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("running"), std::string::npos) << r.out;
  write_file(dir_ + "/gate", "");
  r = cli({"logs", "--job", "2", "--follow"});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(finished(2));
}

}  // namespace
