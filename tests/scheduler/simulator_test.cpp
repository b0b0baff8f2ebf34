// The simulator's metrics and its refusal of impossible jobs and invalid decisions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "sched_test_util.h"

namespace ember::sched {
namespace {

using testing::error_of;
using testing::jcts;
using testing::job;
using testing::run;

TEST(Simulator, Percentile) {
  EXPECT_DOUBLE_EQ(percentile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({10, 20, 30, 40, 50}, 0.99), 49.6);
  EXPECT_DOUBLE_EQ(percentile({7}, 0.99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0);
}

TEST(Simulator, MetricsByHand) {
  // Two devices, FCFS: a 0-10 (both devices), b waits 5-10 then runs 10-30, c (1 device)
  // arrives at 20 and runs 20-25 beside b.
  std::vector<JobSpec> jobs = {job("a", 0, 2, 10), job("b", 5, 1, 20), job("c", 20, 1, 5)};
  SimResult r = run("fcfs", jobs, 2);
  // JCTs: a 10, b 25, c 5.
  EXPECT_DOUBLE_EQ(r.metrics.avg_jct, 40.0 / 3);
  EXPECT_DOUBLE_EQ(r.metrics.p50_jct, 10);
  EXPECT_DOUBLE_EQ(r.metrics.makespan, 30);
  // Arrival window 0-20: devices busy 2x10 (a) + 1x10 (b, 10-20) = 30 of 40 device-seconds.
  EXPECT_DOUBLE_EQ(r.metrics.busy_fraction, 0.75);
  // Queue delays: a 0, b 5, c 0.
  EXPECT_DOUBLE_EQ(r.metrics.avg_queue_delay, 5.0 / 3);
  EXPECT_DOUBLE_EQ(r.metrics.max_slowdown, 1.25);
  EXPECT_DOUBLE_EQ(r.metrics.preemptions_per_job, 0);
  EXPECT_EQ(r.jobs[1].first_start, 10);
  EXPECT_EQ(r.jobs[1].finish, 30);
  EXPECT_EQ(r.gpus, 2);
  EXPECT_FALSE(r.traits.clairvoyant);
}

TEST(Simulator, SimultaneousArrivalsUseTheWholeRunForBusyFraction) {
  std::vector<JobSpec> jobs = {job("a", 0, 1, 10), job("b", 0, 1, 30)};
  SimResult r = run("fcfs", jobs, 2);
  EXPECT_DOUBLE_EQ(r.metrics.busy_fraction, 40.0 / 60);
}

TEST(Simulator, ZeroDurationJobs) {
  std::vector<JobSpec> jobs = {job("a", 0, 1, 0), job("b", 0, 1, 5)};
  SimResult r = run("las", jobs, 1);
  EXPECT_EQ(r.jobs[0].jct(), 0);
  EXPECT_EQ(r.jobs[1].jct(), 5);
}

TEST(Simulator, RejectsJobsThatCanNeverRun) {
  std::vector<JobSpec> jobs = {job("big", 0, 16, 10)};
  EXPECT_NE(error_of([&] { run("fcfs", jobs, 8); }).find("job 'big' needs 16 devices but the cluster has 8"),
            std::string::npos);
  JobSpec nodur = job("x", 0, 1, 5);
  nodur.duration = -1;
  EXPECT_NE(error_of([&] { run("fcfs", {nodur}, 8); }).find("job 'x' has no duration"), std::string::npos);
  auto p = make_policy("fcfs");
  SimOptions o;
  o.preempt_cost = -1;
  EXPECT_THROW(simulate({job("a", 0, 1, 1)}, Topology::uniform(1, 0), *p, o), Error);
}

// Policies that break the rules, to check that the simulator does not let them.
class Rogue : public Policy {
 public:
  explicit Rogue(int mode) : mode_(mode) {}
  std::string name() const override { return "rogue"; }
  PolicyTraits traits() const override { return {}; }
  Decision decide(const SchedState& s) override {
    Decision d;
    if (mode_ == 0 && !s.waiting.empty()) d.start.push_back({s.waiting[0]->id, {{0, 2}}});  // too many
    if (mode_ == 1 && !s.waiting.empty()) d.preempt.push_back(s.waiting[0]->id);            // not running
    if (mode_ == 2 && !s.waiting.empty()) {                                                 // the same job twice
      d.start.push_back({s.waiting[0]->id, {{0, 1}}});
      d.start.push_back({s.waiting[0]->id, {{0, 1}}});
    }
    return d;  // modes 3 and 4: never start anything
  }
  // Mode 4 keeps waking up, as a policy waiting for its next round does: never a reason to stop.
  double next_wakeup(const SchedState& s) const override { return mode_ == 4 ? s.now + 60 : kInf; }

 private:
  int mode_;
};

TEST(Simulator, RejectsInvalidDecisions) {
  std::vector<JobSpec> jobs = {job("a", 0, 1, 10), job("b", 1, 1, 10)};
  auto with = [&](int mode) {
    return error_of([&] {
      Rogue p(mode);
      simulate(jobs, Topology::uniform(2, 0), p);
    });
  };
  EXPECT_NE(with(0).find("policy 'rogue': cluster: cannot place job 'a': placement has 2 devices, the gang needs 1"),
            std::string::npos);
  EXPECT_NE(with(1).find("policy 'rogue' preempted job 0, which is not running"), std::string::npos);
  EXPECT_NE(with(2).find("policy 'rogue' started job 0, which is not waiting"), std::string::npos);
  EXPECT_NE(with(3).find("policy 'rogue' left 2 job(s) waiting"), std::string::npos);
  // A policy that wakes forever and starts nothing on an idle cluster is stopped, not run forever.
  EXPECT_NE(with(4).find("policy 'rogue' left 2 job(s) waiting at t="), std::string::npos);
  EXPECT_NE(with(4).find("(first: 'a', 1 device(s))"), std::string::npos);
}

TEST(Simulator, ReportsPolicyCounters) {
  std::vector<JobSpec> jobs = {job("a", 0, 2, 100), job("b", 10, 4, 50)};
  SimResult r = run("sa", jobs, 4);
  EXPECT_GE(r.counters.at("decisions"), 2);
  EXPECT_GE(r.counters.at("searches"), 1);
  EXPECT_TRUE(r.traits.clairvoyant);
  EXPECT_TRUE(r.traits.preemptive);
}

// What a preemption costs on a real machine, by hand. One device; A (100 s) runs from 0, B (10 s)
// arrives at 50 and SRSF preempts A for it.
TEST(Simulator, StopDelayRestartDelayAndLostWorkByHand) {
  const std::vector<JobSpec> jobs = {job("a", 0, 1, 100), job("b", 50, 1, 10)};
  auto with = [&](const SimOptions& o, const std::vector<JobSpec>& js) {
    auto p = make_policy("srsf");
    return jcts(simulate(js, Topology::uniform(1, 0), *p, o));
  };
  // Free and instant: B runs 50-60, A resumes at 60 with 50 s left.
  auto m = with({}, jobs);
  EXPECT_DOUBLE_EQ(m["b"], 10);
  EXPECT_DOUBLE_EQ(m["a"], 110);
  // A keeps the device 5 s while it checkpoints and exits: B runs 55-65, A 65-115.
  m = with({.stop_delay = 5}, jobs);
  EXPECT_DOUBLE_EQ(m["b"], 15);
  EXPECT_DOUBLE_EQ(m["a"], 115);
  // Its restart costs 3 s of work: A ends at 113.
  m = with({.restart_delay = 3}, jobs);
  EXPECT_DOUBLE_EQ(m["a"], 113);
  // Checkpoints every 30 s of work: at 50 s of work the last was at 30, so 20 s are lost.
  m = with({.checkpoint_interval = 30}, jobs);
  EXPECT_DOUBLE_EQ(m["a"], 130);
  // A job's own interval wins over the default: 0 (it checkpoints when stopped) loses nothing,
  // 40 loses 10 s.
  std::vector<JobSpec> own = jobs;
  own[0].checkpoint_interval = 0;
  EXPECT_DOUBLE_EQ(with({.checkpoint_interval = 30}, own)["a"], 110);
  own[0].checkpoint_interval = 40;
  EXPECT_DOUBLE_EQ(with({.checkpoint_interval = 30}, own)["a"], 120);
  // All at once, with a preemption cost on top: 60 + 3 + 20 + 7 + 5 s of stop.
  m = with({.preempt_cost = 7, .stop_delay = 5, .restart_delay = 3, .checkpoint_interval = 30}, jobs);
  EXPECT_DOUBLE_EQ(m["b"], 15);
  EXPECT_DOUBLE_EQ(m["a"], 65 + 50 + 3 + 20 + 7);
  EXPECT_NE(error_of([&] { with({.stop_delay = -1}, jobs); }).find("stop delay"), std::string::npos);
  // Every start costs 2 s of launching: B runs 50-62, A (two starts) 0-50 and 62-116.
  m = with({.start_delay = 2}, jobs);
  EXPECT_DOUBLE_EQ(m["b"], 12);
  EXPECT_DOUBLE_EQ(m["a"], 116);
}

// With a stop delay the victims keep their devices until their exit, as in the daemon: two
// devices, a 2-wide short job arrives while two 1-wide jobs run; SRSF preempts both for it, and
// it starts only once both have exited (the decision at the preemption may not start it on their
// devices, which the simulator would reject as an invalid decision).
TEST(Simulator, AStopDelayHoldsTheVictimsDevicesUntilItsExit) {
  const std::vector<JobSpec> jobs = {job("long", 0, 1, 1000), job("mid", 0, 1, 500), job("wide", 10, 2, 20)};
  auto p = make_policy("srsf");
  SimOptions o;
  o.stop_delay = 4;
  const auto m = jcts(simulate(jobs, Topology::uniform(2, 0), *p, o));
  // Both are preempted at 10 and hold their devices until 14; wide runs 14-34.
  EXPECT_DOUBLE_EQ(m.at("wide"), 24);
  EXPECT_DOUBLE_EQ(m.at("mid"), 34 + 490);
  EXPECT_DOUBLE_EQ(m.at("long"), 34 + 990);
}

}  // namespace
}  // namespace ember::sched
