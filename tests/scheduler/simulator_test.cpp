// The simulator's metrics and its refusal of impossible jobs and invalid decisions.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "sched_test_util.h"

namespace ember::sched {
namespace {

using testing::job;
using testing::run;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

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
    return d;  // mode 3: never starts anything
  }

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
}

TEST(Simulator, ReportsPolicyCounters) {
  std::vector<JobSpec> jobs = {job("a", 0, 2, 100), job("b", 10, 4, 50)};
  SimResult r = run("sa", jobs, 4);
  EXPECT_GE(r.counters.at("decisions"), 2);
  EXPECT_GE(r.counters.at("searches"), 1);
  EXPECT_TRUE(r.traits.clairvoyant);
  EXPECT_TRUE(r.traits.preemptive);
}

}  // namespace
}  // namespace ember::sched
