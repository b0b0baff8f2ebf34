// Every policy on small traces whose job completion times were worked out by hand (the reasoning
// for each is in the comments), so that a change in any policy's behaviour shows up as a number.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "sched_test_util.h"

namespace ember::sched {
namespace {

using testing::jcts;
using testing::job;
using testing::preemptions;
using testing::run;
using JctMap = std::map<std::string, double>;

// Four devices in one pool (tests/scheduler/data/small.csv):
//   a: t=0, 2 devices, 100 s   b: t=10, 4 devices, 50 s   c: t=20, 1 device, 30 s
//   d: t=20, 1 device, 200 s   e: t=40, 2 devices, 20 s
std::vector<JobSpec> small() {
  return {job("a", 0, 2, 100), job("b", 10, 4, 50), job("c", 20, 1, 30), job("d", 20, 1, 200), job("e", 40, 2, 20)};
}

TEST(ExactJct, FcfsBlocksBehindTheWideHead) {
  // a runs 0-100; b (4 devices) waits for all four and runs 100-150; c, d, e wait behind b and
  // start at 150: c ends 180, e 170, d 350.
  SimResult r = run("fcfs", small(), 4);
  EXPECT_EQ(jcts(r), (JctMap{{"a", 100}, {"b", 140}, {"c", 160}, {"d", 330}, {"e", 130}}));
  EXPECT_DOUBLE_EQ(r.metrics.avg_jct, 172);
  EXPECT_DOUBLE_EQ(r.metrics.makespan, 350);
}

TEST(ExactJct, BackfillNeverDelaysTheHead) {
  // b's reservation is t=100 (when a ends). c (ends 50) and, at t=50, e (ends 70) finish before
  // it and jump ahead; d (would end at 220+) may not. b runs 100-150, then d 150-350.
  SimResult r = run("fcfs-backfill", small(), 4);
  EXPECT_EQ(jcts(r), (JctMap{{"a", 100}, {"b", 140}, {"c", 30}, {"d", 330}, {"e", 30}}));
}

TEST(ExactJct, SjfRunsShortEstimatesFirstAndFills) {
  // t=20: c (30) fits, b (50) does not, d (200) fills the last device. t=100: e starts (ends
  // 120); b waits for d (ends 220) and runs 220-270.
  SimResult r = run("sjf", small(), 4);
  EXPECT_EQ(jcts(r), (JctMap{{"a", 100}, {"b", 260}, {"c", 30}, {"d", 200}, {"e", 80}}));
}

TEST(ExactJct, PriorityAndLasFillInSubmissionOrderWhenAllAreEqual) {
  // Equal priorities and every job in LAS's first queue: first fit in submission order, which
  // on this trace makes the same choices as SJF.
  JctMap want{{"a", 100}, {"b", 260}, {"c", 30}, {"d", 200}, {"e", 80}};
  EXPECT_EQ(jcts(run("priority", small(), 4)), want);
  EXPECT_EQ(jcts(run("las", small(), 4)), want);
}

TEST(ExactJct, SrsfAndGreedyPreemptForLessRemainingService) {
  // Remaining service = devices x seconds. t=20: c and d fill the free devices. t=40: e (40)
  // beats a (2x60=120): a is preempted (d, though worse, frees too little alone). t=50: c done;
  // a (120) beats d (170): d preempted. t=60: e done, d restarts. t=110: a done. t=230: d done,
  // b runs to 280.
  JctMap want{{"a", 110}, {"b", 270}, {"c", 30}, {"d", 210}, {"e", 20}};
  for (const char* p : {"srsf", "greedy"}) {
    SimResult r = run(p, small(), 4);
    EXPECT_EQ(jcts(r), want) << p;
    EXPECT_EQ(preemptions(r), (std::map<std::string, int>{{"a", 1}, {"b", 0}, {"c", 0}, {"d", 1}, {"e", 0}})) << p;
  }
}

TEST(ExactJct, SearchPoliciesPackMoreCompletionRate) {
  // Objective: sum of 1/remaining over running jobs. t=10: b (1/50) beats a (1/90) for the 4
  // devices: a preempted, b starts. t=20: c+a+d (1/30+1/90+1/200) beat b (1/40): b preempted.
  // t=40: e replaces a. t=50: a replaces d. t=60: b (1/40) beats a+d (1/60+1/170): a preempted,
  // b runs 60-100; then a (60 s left) runs 100-160 and d (170 s left) 100-270.
  JctMap want{{"a", 160}, {"b", 90}, {"c", 30}, {"d", 250}, {"e", 20}};
  for (std::string p : {"ilp", "sa", "ga"}) {
    // Searching at every decision that may gain (interval 0), not once per half hour.
    SimResult r = run(p, small(), 4, 0, 0, {{p + ".interval", "0"}});
    EXPECT_EQ(jcts(r), want) << p;
    EXPECT_DOUBLE_EQ(r.metrics.avg_jct, 110) << p;
  }
}

TEST(ExactJct, BestFitPacksSoThatAGangStillFits) {
  // Two nodes of 4. p (2) and q (1) both go on node 0 (tightest fit), so r (4) starts at once on
  // node 1; s (3) then waits for r (FCFS) and runs 15-75.
  std::vector<JobSpec> jobs = {job("p", 0, 2, 100), job("q", 0, 1, 50), job("r", 5, 4, 10), job("s", 6, 3, 60)};
  EXPECT_EQ(jcts(run("fcfs", jobs, 8, 4)), (JctMap{{"p", 100}, {"q", 50}, {"r", 10}, {"s", 69}}));
}

TEST(ExactJct, GangSpansTheFewestNodes) {
  // Nodes of 4: g (6 devices) must span two nodes. With h (1 device) on node 0 it fits at once
  // (4 + 2); with k (3 devices) there, two nodes hold only 5 free, so g waits until k ends.
  EXPECT_EQ(jcts(run("fcfs", {job("h", 0, 1, 30), job("g", 1, 6, 10)}, 8, 4)), (JctMap{{"h", 30}, {"g", 10}}));
  std::vector<JobSpec> jobs = {job("k", 0, 3, 30), job("g", 1, 6, 10)};
  EXPECT_EQ(jcts(run("fcfs", jobs, 8, 4)), (JctMap{{"k", 30}, {"g", 39}}));
  // Three nodes: g takes two empty ones at once.
  EXPECT_EQ(jcts(run("fcfs", jobs, 12, 4)), (JctMap{{"k", 30}, {"g", 10}}));
}

TEST(ExactJct, PriorityAgingOvertakes) {
  // Two devices. x holds both until 100. Without aging z (priority 3) goes first at t=100 and y
  // (2 devices, priority 0) waits for it; with 10 points/s of aging y's earlier submission wins.
  std::vector<JobSpec> jobs = {job("x", 0, 2, 100), job("y", 1, 2, 10), job("z", 2, 1, 10, -2, 3)};
  EXPECT_EQ(jcts(run("priority", jobs, 2)), (JctMap{{"x", 100}, {"y", 119}, {"z", 108}}));
  EXPECT_EQ(jcts(run("priority", jobs, 2, 0, 0, {{"priority.aging", "36000"}})),
            (JctMap{{"x", 100}, {"y", 109}, {"z", 118}}));
}

TEST(ExactJct, SjfTrustsEstimatesSrsfTrustsDurations) {
  // One device. y claims 5 s but runs 30; z claims 20 and runs 10.
  std::vector<JobSpec> jobs = {job("x", 0, 1, 50), job("y", 1, 1, 30, 5), job("z", 2, 1, 10, 20)};
  // SJF: at t=50 y (est 5) then z.
  EXPECT_EQ(jcts(run("sjf", jobs, 1)), (JctMap{{"x", 50}, {"y", 79}, {"z", 88}}));
  // SRSF (true durations): y preempts x at 1, z preempts y at 2 (10 < 29), then y, then x.
  EXPECT_EQ(jcts(run("srsf", jobs, 1)), (JctMap{{"x", 90}, {"y", 40}, {"z", 10}}));
  // Greedy (estimates): y preempts x at 1; z (est 20) does not beat y (est 4 left); y runs to 31,
  // then z (20) before x (49).
  EXPECT_EQ(jcts(run("greedy", jobs, 1)), (JctMap{{"x", 90}, {"y", 30}, {"z", 39}}));
  // SRSF told to rank by the estimates, as a live daemon must: y (est 5) preempts x at 1; z (20)
  // does not beat y (4 left, then 1 s once it has outlived its estimate); y runs to 31, z to 41.
  EXPECT_EQ(jcts(run("srsf", jobs, 1, 0, 0, {{"srsf.estimates", "1"}})), (JctMap{{"x", 90}, {"y", 30}, {"z", 39}}));
  EXPECT_THROW(run("srsf", jobs, 1, 0, 0, {{"srsf.estimates", "2"}}), Error);
}

TEST(ExactJct, PreemptionCostIsRepeatedWork) {
  // As above with 5 s lost per preemption: x needs 49+5 after t=1, y 29+5 after t=2.
  std::vector<JobSpec> jobs = {job("x", 0, 1, 50), job("y", 1, 1, 30, 5), job("z", 2, 1, 10, 20)};
  SimResult r = run("srsf", jobs, 1, 0, 5);
  EXPECT_EQ(jcts(r), (JctMap{{"x", 100}, {"y", 45}, {"z", 10}}));
  EXPECT_EQ(preemptions(r), (std::map<std::string, int>{{"x", 1}, {"y", 1}, {"z", 0}}));
  EXPECT_DOUBLE_EQ(r.metrics.preemptions_per_job, 2.0 / 3);
}

TEST(ExactJct, LasDemotesAtTheThresholdAndGuardsStarvation) {
  // One device, one threshold at 10 device-seconds.
  std::vector<JobSpec> jobs = {job("x", 0, 1, 30), job("y", 5, 1, 20), job("z", 40, 1, 5)};
  // x sinks at t=10 and y (top queue) preempts it; y sinks at 20 but, running, keeps its device
  // against x in the same queue; x resumes at 30, z (top queue) preempts it at 40 for 5 s.
  SimResult r = run("las", jobs, 1, 0, 0, {{"las.thresholds", "10"}, {"las.promote", "0"}});
  EXPECT_EQ(jcts(r), (JctMap{{"x", 55}, {"y", 25}, {"z", 5}}));
  EXPECT_EQ(preemptions(r), (std::map<std::string, int>{{"x", 2}, {"y", 0}, {"z", 0}}));
  // Promotion after waiting as long as it ran: x returns to the top at 20 and preempts y; y
  // returns at 30 and preempts x (which sank again); z runs 40-45, x finishes 45-55.
  r = run("las", jobs, 1, 0, 0, {{"las.thresholds", "10"}, {"las.promote", "1"}});
  EXPECT_EQ(jcts(r), (JctMap{{"x", 55}, {"y", 35}, {"z", 5}}));
  EXPECT_EQ(preemptions(r), (std::map<std::string, int>{{"x", 2}, {"y", 1}, {"z", 0}}));
}

TEST(ExactJct, LasCountsDeviceSeconds) {
  // Thresholds in device-seconds: the 4-device job w sinks after 2.5 s, the 1-device v after 10.
  // Four devices; w runs from 0, v and u (1 device each) arrive at 1 and wait; at 2.5 w sinks and
  // both (top queue) preempt it... w needs 4 so it waits until both are done.
  std::vector<JobSpec> jobs = {job("w", 0, 4, 20), job("v", 1, 1, 5), job("u", 1, 1, 8)};
  SimResult r = run("las", jobs, 4, 0, 0, {{"las.thresholds", "10"}, {"las.promote", "0"}});
  // v runs 2.5-7.5, u 2.5-10.5 (u sinks at 12.5 but is alone); w resumes at 10.5 with 17.5 left.
  EXPECT_EQ(jcts(r), (JctMap{{"w", 28}, {"v", 6.5}, {"u", 9.5}}));
}

}  // namespace
}  // namespace ember::sched

namespace ember::sched {
namespace {

// Strict FCFS on a flat pool written the plainest way (each job starts when the jobs before it
// have started and enough devices are free), against the simulator's fcfs policy on random
// traces: the baseline every ratio in bench/RESULTS.md divides by must be exactly right.
TEST(ExactJct, FcfsMatchesAPlainReferenceOnRandomTraces) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 20; ++trial) {
    const int gpus = 4 + static_cast<int>(rng() % 8);
    std::vector<JobSpec> jobs;
    double t = 0;
    for (int i = 0; i < 60; ++i) {
      t += static_cast<double>(rng() % 20);
      std::string name = "j";  // (not "j" + to_string: GCC 12 warns falsely on that)
      name += std::to_string(i);
      jobs.push_back(testing::job(name, t, 1 + static_cast<int>(rng() % gpus), static_cast<double>(1 + rng() % 100)));
    }
    std::vector<double> want;
    {
      double clock = 0;
      int free = gpus;
      std::multimap<double, int> ends;  // end time -> devices
      for (const JobSpec& j : jobs) {
        clock = std::max(clock, j.submit);
        auto release = [&] {
          while (!ends.empty() && ends.begin()->first <= clock) {
            free += ends.begin()->second;
            ends.erase(ends.begin());
          }
        };
        release();
        while (free < j.gpus) {
          clock = std::max(clock, ends.begin()->first);
          release();
        }
        free -= j.gpus;
        ends.insert({clock + j.duration, j.gpus});
        want.push_back(clock + j.duration - j.submit);
      }
    }
    SimResult r = testing::run("fcfs", jobs, gpus);
    ASSERT_EQ(r.jobs.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(r.jobs[i].jct(), want[i], 1e-6) << "trial " << trial << " job " << i;
  }
}

}  // namespace
}  // namespace ember::sched
