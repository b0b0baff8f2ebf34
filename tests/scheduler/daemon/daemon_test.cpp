// The scheduler daemon with real processes on CPU virtual devices: scheduling, preemption
// through checkpoints, restarts, exit statuses and the command-line clients.
#include <gtest/gtest.h>
#include <signal.h>

#include "daemon_fixture.h"
#include "shared_data.h"

using namespace daemon_test;

namespace {

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

TEST_F(DaemonTest, ThePreemptCommandRequeuesAJobThroughItsCheckpoint) {
  const std::string want = reference(12);
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  int64_t a = submit(trainer("long", 12, "gate", 6));
  ASSERT_TRUE(wait_for([&] { return log_of(a).find("waiting for gate at step 6") != std::string::npos; }));
  Result r = cli({"preempt", "--job", std::to_string(a)});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("preempting job " + std::to_string(a)), std::string::npos) << r.out;
  ASSERT_TRUE(wait_for([&] { return job(a).preemptions() == 1; }));
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a); }));
  JobInfo ja = job(a);
  EXPECT_EQ(ja.state(), ember::proto::DONE) << ja.reason();
  EXPECT_EQ(ja.attempts(), 2);
  EXPECT_NE(log_of(a).find("resumed from step 6"), std::string::npos) << log_of(a);
  EXPECT_EQ(read_file(dir_ + "/long.txt"), want) << "resumed run differs from the uninterrupted one";
  r = cli({"preempt", "--job", std::to_string(a)});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("only a running job can be preempted"), std::string::npos) << r.out;
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

// What gittins learned from finished jobs outlives the daemon: a new daemon tells its policy the
// finished jobs of the database (and only those that finished well, as the first daemon did).
TEST_F(DaemonTest, GittinsKeepsItsHistoryAcrossADaemonRestart) {
  start_daemon({"--devices", "cpu:2", "--policy", "gittins"});
  write_file(dir_ + "/gate", "");
  std::vector<int64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(submit(gated("g" + std::to_string(i), 1, "gate")));
  JobSpec bad = gated("bad", 1, "gate");
  bad.set_args(1, "exit 3");
  ids.push_back(submit(bad));
  ASSERT_TRUE(wait_for([&] {
    for (int64_t id : ids)
      if (!finished(id)) return false;
    return true;
  }));
  EXPECT_EQ(job(ids.back()).state(), ember::proto::FAILED);
  auto learned = [&] {
    Response r = status();
    auto it = r.policy_counters().find("history_jobs");
    return it == r.policy_counters().end() ? -1.0 : it->second;
  };
  EXPECT_EQ(learned(), 3);
  Result shown = cli({"status"});
  EXPECT_NE(shown.out.find("policy gittins (history_jobs 3"), std::string::npos) << shown.out;
  kill_daemon();
  start_daemon({"--devices", "cpu:2", "--policy", "gittins"});
  EXPECT_EQ(learned(), 3) << "the restarted daemon's policy starts from the finished jobs, not from nothing";
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
  // A working directory that is a file is named as one, not as a folder that does not exist.
  r = cli({"submit", "--workdir", dir_ + "/spec.pbtxt", "--", "/bin/true"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("working directory '" + dir_ +
                       "/spec.pbtxt' is not a folder (it is a file); expected the folder the job runs in"),
            std::string::npos)
      << r.out;
  r = cli({"submit", "--workdir", dir_ + "/nowhere", "--", "/bin/true"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("working directory '" + dir_ + "/nowhere' does not exist; expected the folder the job runs in"),
            std::string::npos)
      << r.out;
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
  start_daemon_on_fake_gpus({"0, 81559", "1, 40960", "2, 81559"}, {"--devices", "gpu", "--policy", "fcfs"});
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

// A decision that preempts a job and starts it again elsewhere (a migration) is applied whole.
// Two nodes of two GPUs (a fake nvidia-smi: the daemon makes one node per memory size; best fit
// fills the smaller one first). A runs on node 1 and E on node 0, each beside a free GPU; C, short
// and two GPUs wide, arrives. SRSF preempts A, the longest, to give C node 1, and in the same
// decision moves A onto node 0's free GPU. The daemon must stop A, wait for its exit (A takes 2 s
// to checkpoint), then start C on node 1 and A on node 0, and leave E alone. It used to reject
// the start of A, which was stopping, drop the rest of the decision with an error, and decide
// again a second later while A still held its GPU, preempting E for C.
TEST_F(DaemonTest, ADecisionThatPreemptsAndRestartsAJobIsAppliedWhole) {
  start_daemon_on_fake_gpus({"0, 81920", "1, 81920", "2, 40960", "3, 40960"}, {"--devices", "gpu", "--policy", "srsf"});
  auto job_spec = [&](const std::string& name, int devices, double expected, const std::string& gate,
                      const std::string& on_term) {
    JobSpec s = gated(name, devices, gate);
    if (!on_term.empty()) s.set_args(1, "trap '" + on_term + "' TERM; " + s.args(1));
    s.set_expected_seconds(expected);
    return s;
  };
  // Best fit packs A and F onto node 1 and E and G onto node 0; F and G then finish.
  const int64_t a = submit(job_spec("a", 1, 10000, "never", "sleep 2; exit 143"));
  const int64_t f = submit(job_spec("f", 1, 5000, "f-gate", ""));
  const int64_t e = submit(job_spec("e", 1, 5000, "never", ""));
  const int64_t g = submit(job_spec("g", 1, 5000, "g-gate", ""));
  ASSERT_EQ(names(job(a)) + " " + names(job(f)) + " " + names(job(e)) + " " + names(job(g)), "gpu2 gpu3 gpu0 gpu1");
  write_file(dir_ + "/f-gate", "");
  write_file(dir_ + "/g-gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(f) && finished(g); }));
  const int64_t c = submit(job_spec("c", 2, 10, "never", ""));
  ASSERT_TRUE(wait_for([&] { return job(a).preemptions() == 1; }));
  ASSERT_TRUE(
      wait_for([&] { return job(a).state() == ember::proto::RUNNING && job(c).state() == ember::proto::RUNNING; }));
  EXPECT_EQ(names(job(c)), "gpu2,gpu3");
  EXPECT_EQ(names(job(a)), "gpu1") << "A moves to node 0's free GPU";
  EXPECT_EQ(job(a).attempts(), 2);
  const JobInfo je = job(e);
  EXPECT_EQ(je.state(), ember::proto::RUNNING);
  EXPECT_EQ(je.preemptions(), 0) << "E was preempted: " << je.reason();
  EXPECT_EQ(je.attempts(), 1);
  const std::string out = read_file(dir_ + "/daemon.out");
  EXPECT_EQ(out.find("error"), std::string::npos) << out;
}

// The daemon tells its policy what a preemption costs (--preempt-cost), as the simulator does.
// Greedy ranks a running job by its value plus what preempting it would lose: r has 100 s left,
// w needs 60 s. Free preemption: w is worth more, r is preempted. At 1000 s a preemption loses
// more than w gains, and r keeps its device.
class PreemptCost : public DaemonTest, public ::testing::WithParamInterface<int> {};

TEST_P(PreemptCost, GreedyWeighsWhatAPreemptionCosts) {
  const int cost = GetParam();
  start_daemon({"--devices", "cpu:1", "--policy", "greedy", "--preempt-cost", std::to_string(cost)});
  JobSpec rs = gated("r", 1, "gate");
  rs.set_expected_seconds(100);
  JobSpec ws = gated("w", 1, "gate");
  ws.set_expected_seconds(60);
  const int64_t r = submit(rs);
  ASSERT_EQ(job(r).state(), ember::proto::RUNNING);
  const int64_t w = submit(ws);
  if (cost == 0) {
    ASSERT_TRUE(wait_for([&] { return job(w).state() == ember::proto::RUNNING; }));
    EXPECT_EQ(job(r).preemptions(), 1);
  } else {
    // Decisions are made before submit answers: this is the decision, not a race.
    EXPECT_EQ(job(w).state(), ember::proto::QUEUED);
    EXPECT_EQ(job(r).state(), ember::proto::RUNNING);
  }
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(r) && finished(w); }));
  EXPECT_EQ(job(r).preemptions(), cost == 0 ? 1 : 0);
  // The preemption comes a moment after r's start, before r's supervisor may have made its
  // process group: the SIGTERM must still reach r (it was once lost, and r killed at the grace).
  Request q;
  q.mutable_status()->set_job(r);
  const Response one = ember::sched::call_daemon(state_, q, 10);
  ASSERT_EQ(one.jobs_size(), 1);
  ASSERT_GT(one.jobs(0).events_size(), 0);
  for (const std::string& ev : one.jobs(0).events()) EXPECT_EQ(ev.find("SIGKILL"), std::string::npos) << ev;
}

INSTANTIATE_TEST_SUITE_P(FreeOrDear, PreemptCost, ::testing::Values(0, 1000));

// A job that checkpoints every checkpoint_interval_s seconds of work (not on SIGTERM) loses what
// it did since the last checkpoint when preempted: the daemon counts that as work still to do
// (lost_seconds, the policy's Job::overhead). Here the interval is longer than the run, so all of
// the run is lost. A negative interval is refused at submission.
TEST_F(DaemonTest, APreemptionLosesTheWorkSinceTheLastCheckpoint) {
  start_daemon({"--devices", "cpu:1", "--policy", "fcfs"});
  JobSpec s = gated("a", 1, "gate");
  s.set_checkpoint_interval_s(1000);
  const int64_t a = submit(s);
  ASSERT_TRUE(wait_for([&] { return log_of(a).find("Cpus_allowed_list") != std::string::npos; }));
  Result r = cli({"preempt", "--job", std::to_string(a)});
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_TRUE(wait_for([&] { return job(a).preemptions() == 1; }));
  // Its whole first run is lost (fcfs may have restarted it since: run_seconds counts that too).
  const JobInfo ja = job(a);
  EXPECT_GT(ja.lost_seconds(), 0);
  EXPECT_LE(ja.lost_seconds(), ja.run_seconds());
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a); }));
  EXPECT_EQ(job(a).state(), ember::proto::DONE);
  EXPECT_DOUBLE_EQ(job(a).lost_seconds(), ja.lost_seconds()) << "nothing is lost by finishing";
  s.set_checkpoint_interval_s(-1);
  Request q;
  *q.mutable_submit()->mutable_spec() = s;
  const Response bad = ember::sched::call_daemon(state_, q, 10);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("checkpoint_interval_s must be >= 0"), std::string::npos) << bad.error();
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
      (fs::path(EMBER_SOURCE_DIR) / "../shared/data/traces/tiresias_60_job.csv").lexically_normal();
  EMBER_NEEDS_SHARED_FILE(trace);
  const std::string net = dir_ + "/policy.ckpt";
  Result t = run({EMBER_EXE,
                  "sched",
                  "train-policy",
                  "--trace",
                  trace,
                  "--out",
                  net,
                  "--gpus",
                  "8",
                  "--window",
                  "20",
                  "--val-windows",
                  "2",
                  "--rollouts",
                  "2",
                  "--iterations",
                  "2",
                  "--eval-every",
                  "1",
                  "--train-until",
                  "1e9"});
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
  EXPECT_EQ(status().policy_counters().at("history_jobs"), 4) << "every finished job told to the policy";
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
