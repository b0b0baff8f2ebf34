// Heterogeneous clusters: device types in the topology, the speed table, the simulator running a
// job at its model's speed on the slowest type it holds, the allocation program against brute
// force, and the gavel policy putting each job where it gains most.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sched_test_util.h"
#include "scheduler/allocation.h"
#include "scheduler/lp.h"
#include "scheduler/policies/policies.h"
#include "scheduler/speeds.h"

namespace ember::sched {
namespace {

using testing::error_of;
using testing::job;

TEST(DeviceTypes, ParsedIntoNodesOfOneTypeEach) {
  auto types = Topology::parse_types("h200:16,a100:12,v100:8");
  ASSERT_EQ(types.size(), 3u);
  Topology t = Topology::typed(types, 8);
  EXPECT_EQ(t.num_devices(), 36);
  EXPECT_EQ(t.num_types(), 3);
  EXPECT_EQ(t.type_name(1), "a100");
  EXPECT_EQ(t.devices_of_type(0), 16);
  EXPECT_EQ(t.devices_of_type(1), 12);
  ASSERT_EQ(t.num_nodes(), 5);  // 8+8 h200, 8+4 a100, 8 v100
  EXPECT_EQ(t.node(3).gpus, 4);
  EXPECT_EQ(t.node(3).type, 1);
  EXPECT_EQ(t.node(4).type, 2);
  EXPECT_NE(error_of([] { Topology::parse_types("h200:16,a100"); }).find("expected NAME:COUNT"), std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse_types("h200:0"); }).find("whole number of devices >= 1, got '0'"),
            std::string::npos);
  EXPECT_NE(error_of([] { Topology::parse_types("a:1,a:2"); }).find("type 'a' appears twice"), std::string::npos);
}

TEST(SpeedTableTest, DefaultsFilesAndModels) {
  SpeedTable d = SpeedTable::defaults();
  EXPECT_EQ(d.speed("cnn", "v100"), 1.0);
  EXPECT_GT(d.speed("transformer", "h200"), d.speed("rl", "h200"));
  SpeedTable t = SpeedTable::parse("# per model\nmodel,slow,fast\nx,1,4\ny,1,1.1\n", "t.csv");
  EXPECT_EQ(t.speed("x", "fast"), 4.0);
  EXPECT_NE(error_of([&] { t.speed("z", "fast"); }).find("no model 'z'"), std::string::npos);
  EXPECT_NE(error_of([&] { t.speed("x", "h200"); }).find("no device type 'h200'"), std::string::npos);
  EXPECT_NE(error_of([] { SpeedTable::parse("name,a\nx,1\n", "t.csv"); }).find("t.csv:1: expected a header"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              SpeedTable::parse("model,a\nx,0\n", "t.csv");
            }).find("t.csv:2: model 'x' on 'a': expected a speed > 0, got '0'"),
            std::string::npos);
  EXPECT_NE(error_of([] { SpeedTable::parse("model,a,b\nx,1\n", "t.csv"); }).find("expected a model and 2 speeds"),
            std::string::npos);
  EXPECT_NE(error_of([] { SpeedTable::read("/nonexistent.csv"); }).find("cannot open"), std::string::npos);
  Topology topo = Topology::typed({{"fast", 1}, {"h200", 1}}, 0);
  EXPECT_NE(error_of([&] { t.check_types(topo); }).find("device type 'h200' is not in the speed table"),
            std::string::npos);
  // Jobs without a model get one of the table's, the same one every time; a model the table
  // lacks is an error.
  std::vector<JobSpec> jobs = {job("a", 0, 1, 1), job("b", 0, 1, 1), job("c", 0, 1, 1)};
  std::vector<JobSpec> again = jobs;
  d.assign_models(jobs);
  d.assign_models(again);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_FALSE(jobs[i].model.empty());
    EXPECT_EQ(jobs[i].model, again[i].model);
  }
  jobs[0].model = "quantum";
  EXPECT_NE(error_of([&] { d.assign_models(jobs); }).find("job 'a': model 'quantum' is not in the speed table"),
            std::string::npos);
}

// "fast" runs model x 4 times and model y 1.1 times as fast as "slow".
const SpeedTable& two_speeds() {
  static const SpeedTable t = SpeedTable::parse("model,slow,fast\nx,1,4\ny,1,1.1\n", "test table");
  return t;
}

SimResult run_typed(const std::string& policy, std::vector<JobSpec> jobs, const std::vector<DeviceType>& types,
                    int node_gpus, const PolicyParams& params = {}) {
  Topology topo = Topology::typed(types, node_gpus);
  auto p = make_policy(policy, params);
  SimOptions o;
  o.speed = [&topo](const JobSpec& j, int t) { return two_speeds().speed(j.model, topo.type_name(t)); };
  return simulate(jobs, topo, *p, o);
}

TEST(HeterogeneousSimulation, AJobRunsAtItsSpeedOnTheSlowestTypeItHolds) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  JobSpec x = job("x", 0, 1, 400);
  x.model = "x";
  // FCFS places it on the fast type (its fastest with room): 400 s of work in 100 s.
  SimResult r = run_typed("fcfs", {x}, {{"fast", 1}, {"slow", 1}}, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].jct(), 100);
  EXPECT_DOUBLE_EQ(r.jobs[0].run_time, 100);  // wall seconds on its devices
  // A gang of two on one fast and one slow device runs at the slow one's speed.
  JobSpec wide = job("w", 0, 2, 400);
  wide.model = "x";
  r = run_typed("fcfs", {wide}, {{"fast", 1}, {"slow", 1}}, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].jct(), 400);
}

// List-scheduled policies place a job on the types where it runs fastest that have room. The slow
// type is listed first, so a type-blind best fit (the lowest-numbered node on ties) would take it.
TEST(HeterogeneousSimulation, ListSchedulesPlaceAJobOnItsFastestTypeWithRoom) {
  JobSpec x = job("x", 0, 2, 400);
  x.model = "x";
  for (const char* policy : {"fcfs", "las", "srsf"}) {
    SCOPED_TRACE(policy);
    SimResult r = run_typed(policy, {x}, {{"slow", 2}, {"fast", 2}}, 2);
    EXPECT_DOUBLE_EQ(r.jobs[0].jct(), 100);  // on the two fast devices, 4x
    // Two jobs: the second finds the fast node taken and goes to the slow one, whole.
    JobSpec y = job("y", 0, 2, 400);
    y.model = "x";
    r = run_typed(policy, {x, y}, {{"slow", 2}, {"fast", 2}}, 2);
    auto jct = testing::jcts(r);
    EXPECT_DOUBLE_EQ(jct["x"], 100);
    EXPECT_DOUBLE_EQ(jct["y"], 400);
    // A gang wider than the fast type spans both and runs at the slow speed.
    JobSpec wide = job("w", 0, 3, 400);
    wide.model = "x";
    r = run_typed(policy, {wide}, {{"slow", 2}, {"fast", 2}}, 4);
    EXPECT_DOUBLE_EQ(r.jobs[0].jct(), 400);
  }
}

TEST(Allocation, MatchesBruteForceOnThreeJobsAndTwoTypes) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  const std::vector<AllocationProblem> problems = {
      {{{4, 1}, {1.1, 1}, {2, 1}}, {1, 1, 1}, {1, 2}, false},
      {{{3, 1}, {1.5, 1}, {1.2, 1}}, {1, 2, 1}, {2, 2}, false},
      {{{4, 1}, {1.1, 1}, {2, 1}}, {1, 1, 1}, {1, 2}, true},
      {{{2, 1}, {2, 1}, {1, 1}}, {1, 1, 1}, {1, 2}, false},  // jobs 0 and 1 alike: one class
      {{{1, 1}, {1, 1}, {1, 1}}, {1, 1, 1}, {1, 1}, false},  // all alike, as gavel-blind sees them
  };
  for (size_t k = 0; k < problems.size(); ++k) {
    SCOPED_TRACE(k);
    const AllocationProblem& p = problems[k];
    Allocation a = solve_allocation(p);
    // Feasible.
    for (size_t j = 0; j < 3; ++j) EXPECT_LE(a.share[j][0] + a.share[j][1], 1 + 1e-9);
    for (size_t t = 0; t < 2; ++t) {
      double used = 0;
      for (size_t j = 0; j < 3; ++j) used += p.gpus[j] * a.share[j][t];
      EXPECT_LE(used, p.capacity[t] + 1e-9);
    }
    auto value = [&](const std::vector<std::vector<double>>& x) {
      if (!p.throughput) return min_normalised_throughput(p, x);
      double v = 0;
      for (size_t j = 0; j < 3; ++j) v += p.speed[j][0] * x[j][0] + p.speed[j][1] * x[j][1];
      return v;
    };
    EXPECT_NEAR(value(a.share), a.objective, 1e-6);
    // Brute force over shares in steps of 1/10: no feasible point beats the program, and the best
    // one comes within the grid's resolution of it.
    double best = -1;
    std::vector<std::vector<double>> x(3, std::vector<double>(2));
    const int steps = 10;
    std::vector<int> v(6, 0);
    for (;;) {
      for (size_t k = 0; k < 6; ++k) x[k / 2][k % 2] = static_cast<double>(v[k]) / steps;
      bool ok = true;
      for (size_t j = 0; j < 3 && ok; ++j) ok = x[j][0] + x[j][1] <= 1 + 1e-12;
      for (size_t t = 0; t < 2 && ok; ++t) {
        double used = 0;
        for (size_t j = 0; j < 3; ++j) used += p.gpus[j] * x[j][t];
        ok = used <= p.capacity[t] + 1e-12;
      }
      if (ok) best = std::max(best, value(x));
      size_t k = 0;
      while (k < 6 && ++v[k] > steps) v[k++] = 0;
      if (k == 6) break;
    }
    EXPECT_LE(best, a.objective + 1e-6);
    EXPECT_GE(best, a.objective - (p.throughput ? 0.5 : 0.15));
    // Jobs alike in gang and speeds get the same shares: the centre of a degenerate program's
    // optimal face, not whichever vertex the simplex method stops at.
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = i + 1; j < 3; ++j)
        if (p.gpus[i] == p.gpus[j] && p.speed[i] == p.speed[j]) {
          EXPECT_NEAR(a.share[i][0], a.share[j][0], 1e-9) << i << " and " << j;
          EXPECT_NEAR(a.share[i][1], a.share[j][1], 1e-9) << i << " and " << j;
        }
  }
  EXPECT_NE(error_of([] { solve_allocation({{{1, 0}}, {1}, {1, 1}, false}); }).find("has speed 0"), std::string::npos);
}

TEST(Gavel, PutsEachJobWhereItGainsMost) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  // One fast and one slow device. x gains 4x on fast, y 1.1x: the throughput objective gives fast
  // to x (done in 100 s) and slow to y; at the next round (360 s) y, alone, moves to fast for its
  // last 40 s of work. The blind one does not know which device is which.
  JobSpec x = job("x", 0, 1, 400), y = job("y", 0, 1, 400);
  x.model = "x";
  y.model = "y";
  const PolicyParams throughput = {{"gavel.throughput", "1"}, {"gavel-blind.throughput", "1"}};
  // Listed slow first, so that placing by index alone would give x the slow device.
  SimResult aware = run_typed("gavel", {y, x}, {{"slow", 1}, {"fast", 1}}, 1, throughput);
  auto jct = testing::jcts(aware);
  EXPECT_DOUBLE_EQ(jct["x"], 100);
  EXPECT_NEAR(jct["y"], 360 + 40 / 1.1, 1e-6);
  EXPECT_GE(aware.counters.at("lp_solves"), 1);
  SimResult blind = run_typed("gavel-blind", {y, x}, {{"slow", 1}, {"fast", 1}}, 1, throughput);
  EXPECT_GE(blind.metrics.avg_jct, aware.metrics.avg_jct);
  // Max-min fairness shares the fast device instead: x's normalised throughput (4 on fast, 1 on
  // slow, 2.5 on an equal share) and y's (1.1, 1, 1.05) are equal at half of fast each, so both
  // take turns on it round by round and finish in between.
  SimResult fair = run_typed("gavel", {y, x}, {{"slow", 1}, {"fast", 1}}, 1, {{"gavel.round", "20"}});
  jct = testing::jcts(fair);
  EXPECT_GT(jct["x"], 100);
  EXPECT_LT(jct["x"], 400);
  EXPECT_LT(jct["y"], 400);
  EXPECT_NE(error_of([] { make_policy("gavel", {{"gavel.round", "0"}}); }).find("gavel.round"), std::string::npos);
}

TEST(Gavel, AGangWiderThanEveryTypeRunsAcrossTypes) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  // Two devices of each type: w needs three, so no type holds it (the program has no share for it,
  // and with it the smallest normalised throughput would be 0). It runs across both types at the
  // slow one's speed. Four one-device jobs hold the cluster when it arrives at 10; at the next
  // round (360) it goes first, the program's jobs get what is left, and it ends 400 s later.
  for (const char* policy : {"gavel", "gavel-blind"}) {
    SCOPED_TRACE(policy);
    std::vector<JobSpec> jobs;
    for (int i = 0; i < 4; ++i) {
      jobs.push_back(job("x" + std::to_string(i), 0, 1, 4000));
      jobs.back().model = "x";
    }
    JobSpec w = job("w", 10, 3, 400);
    w.model = "x";
    jobs.push_back(w);
    SimResult r = run_typed(policy, jobs, {{"slow", 2}, {"fast", 2}}, 2);
    auto jct = testing::jcts(r);
    EXPECT_DOUBLE_EQ(jct["w"], 360 - 10 + 400);
    for (int i = 0; i < 4; ++i) EXPECT_GT(jct["x" + std::to_string(i)], 0);
    // Alone on the cluster it starts at once.
    r = run_typed(policy, {w}, {{"slow", 2}, {"fast", 2}}, 2);
    EXPECT_DOUBLE_EQ(r.jobs[0].jct(), 400);
  }
}

}  // namespace
}  // namespace ember::sched
