// Defragmenting migrations (ListOptions::defrag): a gang that needs one node while enough devices
// are free, scattered, gets the node that needs the fewest devices moved; the jobs moved start
// again elsewhere in the same decision and pay a preemption.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sched_test_util.h"
#include "scheduler/cluster.h"
#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"
#include "scheduler/sim/simulator.h"

namespace ember::sched {
namespace {

struct TwoNodes {
  TwoNodes() : cluster(Topology::uniform(16, 8)) {
    // Node 0: six one-device jobs (2 free); node 1: two (6 free); a gang of 8 waits.
    for (int i = 0; i < 9; ++i) {
      Job j;
      j.id = i;
      j.spec.name = std::string("j").append(std::to_string(i));
      j.spec.gpus = i == 8 ? 8 : 1;
      jobs.push_back(j);
    }
    for (int i = 0; i < 8; ++i) {
      jobs[i].status = JobStatus::kRunning;
      jobs[i].devices = cluster.allocate(jobs[i], {{i < 6 ? 0 : 1, 1}});
      running.push_back(&jobs[i]);
    }
    jobs[8].status = JobStatus::kWaiting;
    waiting.push_back(&jobs[8]);
  }
  // The gang ranks after every running job: no policy order would preempt for it.
  Decision decide(double defrag) {
    SchedState s;
    s.cluster = &cluster;
    s.waiting = waiting;
    s.running = running;
    std::vector<Ranked> scratch;
    return list_schedule_preemptive(
        s,
        [](const Job& j) {
          return Ranked{j.spec.gpus == 8 ? 1.0 : 0.0, 0, 0, &j};
        },
        scratch, defrag);
  }
  Cluster cluster;
  std::vector<Job> jobs;
  std::vector<const Job*> running, waiting;
};

TEST(Defrag, MovesTheFewestDevicesToFreeANodeForTheGang) {
  TwoNodes t;
  EXPECT_TRUE(t.decide(0).empty()) << "without migrations the gang waits";
  const Decision d = t.decide(1);
  EXPECT_EQ(d.preempt, (std::vector<JobId>{6, 7}));  // node 1's two jobs, not node 0's six
  ASSERT_EQ(d.start.size(), 3u);
  EXPECT_EQ(d.start[0].job, 6);
  EXPECT_EQ(d.start[0].placement, (Placement{{0, 1}}));
  EXPECT_EQ(d.start[1].job, 7);
  EXPECT_EQ(d.start[1].placement, (Placement{{0, 1}}));
  EXPECT_EQ(d.start[2].job, 8);
  EXPECT_EQ(d.start[2].placement, (Placement{{1, 8}}));
  // Two devices moved for a gang of 8 is a share of 0.25: a smaller bound forbids it.
  EXPECT_TRUE(t.decide(0.2).empty());
  EXPECT_FALSE(t.decide(0.25).empty());
}

// A gang that must span nodes: four nodes of 4 devices; nodes 0 and 1 run one one-device job
// each (3 free), nodes 2 and 3 two each (2 free). A gang of 8 needs two whole nodes: 10 devices
// are free but no two nodes hold 8. The two nodes with the most free devices (0 and 1) are
// cleared, their jobs moved onto nodes 2 and 3.
TEST(Defrag, ClearsTheNodesWithTheMostFreeDevicesForAGangThatSpansNodes) {
  Cluster cluster(Topology::uniform(16, 4));
  std::vector<Job> jobs(7);
  std::vector<const Job*> running, waiting;
  const int node_of[] = {0, 1, 2, 2, 3, 3};
  for (int i = 0; i < 7; ++i) {
    jobs[i].id = i;
    jobs[i].spec.name = std::string("j").append(std::to_string(i));
    jobs[i].spec.gpus = i == 6 ? 8 : 1;
    if (i == 6) {
      jobs[i].status = JobStatus::kWaiting;
      waiting.push_back(&jobs[i]);
      continue;
    }
    jobs[i].status = JobStatus::kRunning;
    jobs[i].devices = cluster.allocate(jobs[i], {{node_of[i], 1}});
    running.push_back(&jobs[i]);
  }
  SchedState s;
  s.cluster = &cluster;
  s.waiting = waiting;
  s.running = running;
  auto decide = [&](double defrag) {
    std::vector<Ranked> scratch;
    return list_schedule_preemptive(
        s,
        [](const Job& j) {
          return Ranked{j.spec.gpus == 8 ? 1.0 : 0.0, 0, 0, &j};
        },
        scratch, defrag);
  };
  EXPECT_TRUE(decide(0).empty()) << "without migrations the gang waits";
  const Decision d = decide(1);
  EXPECT_EQ(d.preempt, (std::vector<JobId>{0, 1}));
  ASSERT_EQ(d.start.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(d.start[i].job, i);
    ASSERT_EQ(d.start[i].placement.size(), 1u);
    EXPECT_GE(d.start[i].placement[0].node, 2) << "a moved job lands off the gang's nodes";
  }
  EXPECT_EQ(d.start[2].job, 6);
  EXPECT_EQ(d.start[2].placement, (Placement{{0, 4}, {1, 4}}));
  // The decision applies: every start fits once the moved jobs have left.
  Cluster after(cluster.topology());
  for (int i = 2; i < 6; ++i) after.allocate(jobs[i], {{node_of[i], 1}});
  for (const Start& st : d.start) EXPECT_NO_THROW(after.allocate(jobs[st.job], st.placement));
  // Two devices moved for a gang of 8: a share of 0.25; a smaller bound forbids it.
  EXPECT_TRUE(decide(0.2).empty());
  EXPECT_FALSE(decide(0.25).empty());
}

TEST(Defrag, TheGangStartsAtOnceAndTheMovedJobsPayAPreemption) {
  using testing::job;
  // 16 one-device jobs, one a second, fill node 0 then node 1 (best fit); the first four of each
  // node end at t=20 and leave 4 free devices on each. An 8-device gang that ranks after the long
  // jobs arrives at t=16.
  std::vector<JobSpec> trace;
  for (int i = 0; i < 16; ++i)
    trace.push_back(job(std::string("s").append(std::to_string(i)), i, 1, i % 8 < 4 ? 20 - i : 1000));
  trace.push_back(job("gang", 16, 8, 10000));
  for (double defrag : {0.0, 1.0}) {
    auto policy = make_policy("srsf", {{"srsf.defrag", defrag > 0 ? "1" : "0"}});
    SimOptions o;
    o.preempt_cost = 30;
    o.stop_delay = 0;
    const SimResult r = simulate(trace, Topology::uniform(16, 8), *policy, o);
    const JobResult& gang = r.jobs.back();
    int moved = 0;
    for (size_t i = 0; i < 16; ++i) {
      moved += r.jobs[i].preemptions;
      if (r.jobs[i].preemptions) {
        EXPECT_DOUBLE_EQ(r.jobs[i].run_time, 1000 + 30) << r.jobs[i].name;
      }
    }
    if (defrag > 0) {
      EXPECT_DOUBLE_EQ(gang.first_start, 20);
      EXPECT_EQ(moved, 4);  // one node's long jobs, onto the other node's free devices
    } else {
      EXPECT_DOUBLE_EQ(gang.first_start, 1007);  // node 0's last long job ends
      EXPECT_EQ(moved, 0);
    }
  }
  // As the daemon runs it: the moved jobs hold their devices for 5 s while they checkpoint; the
  // gang and the moved jobs start at the decision after their exit, the moved ones on node 1.
  auto policy = make_policy("srsf", {{"srsf.defrag", "1"}});
  SimOptions o;
  o.preempt_cost = 30;
  o.stop_delay = 5;
  const SimResult r = simulate(trace, Topology::uniform(16, 8), *policy, o);
  EXPECT_DOUBLE_EQ(r.jobs.back().first_start, 25);
  int moved = 0;
  for (size_t i = 0; i < 16; ++i) moved += r.jobs[i].preemptions;
  EXPECT_EQ(moved, 4);
}

TEST(Defrag, TheShareIsAPolicyParameter) {
  for (const char* name : {"srsf", "las", "gittins", "greedy", "ilp", "sa", "ga"}) {
    const std::string key = std::string(name) + ".defrag";
    EXPECT_NO_THROW(make_policy(name, {{key, "0.5"}})) << name;
    EXPECT_THROW(make_policy(name, {{key, "-1"}}), Error) << name;
  }
}

}  // namespace
}  // namespace ember::sched
