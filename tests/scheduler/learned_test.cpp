// The learned policy: its Plackett-Luce gradient against finite differences in float64, the
// network's start as the Gittins ranking, checkpoints, and training that a seed reproduces bit for
// bit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/ops/creation.h"
#include "layers/checkpoint.h"
#include "layers/linear.h"
#include "scheduler/cluster.h"
#include "scheduler/learned/learned_policy.h"
#include "scheduler/learned/policy_features.h"
#include "scheduler/learned/policy_net.h"
#include "scheduler/learned/train_policy.h"
#include "tests/scheduler/sched_test_util.h"

namespace ember::sched::learned {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_learned_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::map<std::string, std::vector<float>> weights(const PolicyNet& net) {
  std::map<std::string, std::vector<float>> w;
  for (const auto& [name, t] : net.state_dict()) w[name] = t.to_vector<float>();
  return w;
}

TEST(PlackettLuce, PrefixGradientMatchesFiniteDifferences) {
  const std::vector<double> s = {0.3, -1.2, 2.0, 0.0, 0.7, -0.4};
  for (int prefix : {0, 1, 3, 6}) {
    std::vector<double> g(s.size(), 0.0), unused(s.size(), 0.0);
    plackett_luce_prefix(s, prefix, 1.0, g);
    for (size_t i = 0; i < s.size(); ++i) {
      std::vector<double> up = s, down = s;
      up[i] += 1e-6, down[i] -= 1e-6;
      const double fd =
          (plackett_luce_prefix(up, prefix, 0, unused) - plackett_luce_prefix(down, prefix, 0, unused)) / 2e-6;
      EXPECT_NEAR(g[i], fd, 1e-7) << "prefix " << prefix << ", score " << i;
    }
  }
}

TEST(PlackettLuce, HandValues) {
  // Two jobs of equal score: either order has probability 1/2.
  std::vector<double> g(2, 0.0);
  EXPECT_DOUBLE_EQ(plackett_luce_prefix({1.0, 1.0}, 1, 1.0, g), std::log(0.5));
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  EXPECT_DOUBLE_EQ(g[1], -0.5);
  // The whole order of three, scores log 1, log 2, log 3: (1/6) x (2/5) x 1.
  std::vector<double> g3(3, 0.0);
  EXPECT_NEAR(plackett_luce_prefix({0, std::log(2.0), std::log(3.0)}, 3, 0, g3), std::log(2.0 / 30), 1e-12);
}

TEST(PolicyNet, StartsAsTheGittinsRankingAndASeedFixesIt) {
  PolicyNet a(7), b(7), c(8);
  std::vector<float> x;
  for (int r = 0; r < 5; ++r)
    for (int f = 0; f < kFeatures; ++f) x.push_back(0.1f * static_cast<float>(r + 1) + 0.03f * static_cast<float>(f));
  std::vector<float> s = a.forward(from_vector(x, {5, kFeatures})).to_vector<float>();
  for (int r = 0; r < 5; ++r)
    EXPECT_FLOAT_EQ(s[r], static_cast<float>(kGittinsWeight) * x[r * kFeatures + kGittinsFeature]) << "row " << r;
  EXPECT_EQ(weights(a), weights(b));
  EXPECT_NE(weights(a), weights(c));
}

TEST(PolicyNet, CheckpointRoundTripAndWrongFiles) {
  PolicyNet a(3);
  const std::string path = temp_path("net.ckpt");
  save_policy_net(a, path, {{"command", "test"}});
  auto b = load_policy_net(path);
  EXPECT_EQ(weights(a), weights(*b));
  // A checkpoint of something else is refused by kind.
  nn::Linear other(2, 2);
  const std::string wrong = temp_path("other.ckpt");
  save(other, wrong);
  try {
    load_policy_net(wrong);
    FAIL() << "a Linear's checkpoint loaded as a policy";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a policy network checkpoint"), std::string::npos) << e.what();
  }
  // One of the right kind for a network of another shape is refused by shape.
  CheckpointContents c = read_checkpoint(path);
  c.metadata["features"] = "7";
  const std::string reshaped = temp_path("reshaped.ckpt");
  write_checkpoint(reshaped, c);
  try {
    load_policy_net(reshaped);
    FAIL() << "a network of 7 features loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a network of 7 features"), std::string::npos) << e.what();
  }
  std::filesystem::remove(reshaped);
  EXPECT_THROW(make_policy("learned:" + temp_path("missing.ckpt")), Error);
  EXPECT_THROW(make_policy("learned:" + path, {{"learned.x", "1"}}), Error);
  EXPECT_EQ(make_policy("learned:" + path)->name(), "learned:" + std::filesystem::path(path).filename().string());
  std::filesystem::remove(path);
  std::filesystem::remove(wrong);
}

// 240 jobs of 1, 2 or 4 devices, 60 s to 6 h, one every 90 s, in three queues (a fixed LCG).
std::vector<JobSpec> trace() {
  std::vector<JobSpec> t;
  unsigned long long x = 99;
  auto next = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int i = 0; i < 240; ++i) {
    JobSpec j = testing::job(std::string("j").append(std::to_string(i)), 90.0 * i, 1 << (next() % 3),
                             std::round(60 * std::pow(360.0, (next() % 1000) / 1000.0)));
    j.queue = std::string(1, static_cast<char>('a' + next() % 3));
    t.push_back(j);
  }
  return t;
}

TEST(TrainPolicy, ASeedGivesTheSameWeightsBitForBit) {
  TrainPolicyOptions o;
  o.train_until = 90.0 * 200;
  o.gpus = 6;
  o.window_jobs = 60;
  o.val_windows = 2;
  o.rollouts = 3;
  o.iterations = 3;
  o.eval_every = 3;
  TrainResult a = train_policy(trace(), o), b = train_policy(trace(), o);
  o.seed = 2;
  TrainResult c = train_policy(trace(), o);
  ASSERT_EQ(a.curve.size(), 4u);  // the start, then three iterations
  EXPECT_GE(a.curve.front().eval, 0);
  EXPECT_GE(a.curve.back().eval, 0);
  EXPECT_EQ(weights(*a.net), weights(*b.net));
  // The network returned is the best on validation: the start (iteration 0) or the last step's.
  ASSERT_TRUE(a.best_iteration == 0 || a.best_iteration == 3) << a.best_iteration;
  EXPECT_EQ(weights(*a.net) == weights(PolicyNet(1)), a.best_iteration == 0);
  EXPECT_DOUBLE_EQ(a.best_eval, a.curve[a.best_iteration].eval);
  EXPECT_NE(weights(*a.net), weights(*c.net)) << "another seed gave the same network";
  const std::string csv = curve_csv(a.curve);
  EXPECT_EQ(csv.rfind("iteration,window_start,rollout_mean_avg_jct", 0), 0u);
  EXPECT_NE(curve_svg(a.curve, "t").find("<polyline"), std::string::npos);
}

TEST(TrainPolicy, BadOptionsAreErrors) {
  TrainPolicyOptions o;
  o.rollouts = 1;
  EXPECT_THROW(train_policy(trace(), o), Error);
  o = {};
  o.window_jobs = 200;  // the training part (jobs before five days: all 240) is under two windows
  EXPECT_THROW(train_policy(trace(), o), Error);
  o.window_jobs = 60;
  o.val_windows = 0;
  EXPECT_THROW(train_policy(trace(), o), Error);
  o.val_windows = 4;  // 240 jobs: four validation windows of 60 leave none to train on
  EXPECT_THROW(train_policy(trace(), o), Error);
  o.val_windows = 3;
  o.iterations = 1;
  o.rollouts = 2;
  o.gpus = 6;
  EXPECT_NO_THROW(train_policy(trace(), o));
}

TEST(LearnedPolicy, ExplorationNeedsAPositiveTemperature) {
  LearnedPolicy p(std::make_shared<PolicyNet>(1));
  Episode e;
  EXPECT_THROW(p.explore(1, &e, 0), Error);
}

// Exploring, what is drawn for each job must not depend on the order the driver lists its running
// jobs in: the same seed on the same state, listed two ways, records the same rows and the same
// order and decides the same.
TEST(LearnedPolicy, ExplorationDoesNotDependOnTheOrderOfTheRunningJobs) {
  Cluster cluster(Topology::uniform(4, 0));
  std::vector<Job> jobs(5);
  for (int i = 0; i < 5; ++i) {
    jobs[i].id = i;
    jobs[i].spec.name = std::string("j").append(std::to_string(i));
    jobs[i].spec.gpus = 1;
    jobs[i].spec.submit = i;
  }
  std::vector<const Job*> running, waiting;
  for (int i = 0; i < 3; ++i) {
    jobs[i].status = JobStatus::kRunning;
    jobs[i].executed = 100.0 * (i + 1);  // different attained service: different scores
    jobs[i].devices = cluster.allocate(jobs[i], {{0, 1}});
    running.push_back(&jobs[i]);
  }
  for (int i = 3; i < 5; ++i) {
    jobs[i].status = JobStatus::kWaiting;
    waiting.push_back(&jobs[i]);
  }
  auto explore = [&](std::vector<const Job*> listed, Episode& e) {
    LearnedPolicy p(std::make_shared<PolicyNet>(1));
    p.explore(9, &e, 1.0);
    SchedState s;
    s.now = 500;
    s.cluster = &cluster;
    s.running = listed;
    s.waiting = waiting;
    return p.decide(s);
  };
  Episode a, b;
  const Decision da = explore(running, a);
  const Decision db = explore({running[2], running[0], running[1]}, b);
  EXPECT_EQ(a.features, b.features);
  ASSERT_EQ(a.decisions.size(), 1u);
  ASSERT_EQ(b.decisions.size(), 1u);
  EXPECT_EQ(a.decisions[0].order, b.decisions[0].order);
  EXPECT_EQ(da.preempt, db.preempt);
  ASSERT_EQ(da.start.size(), db.start.size());
  for (size_t i = 0; i < da.start.size(); ++i) EXPECT_EQ(da.start[i].job, db.start[i].job);
}

TEST(LearnedPolicy, RunsInTheSimulatorAndKnowsOnlyHistory) {
  auto net = std::make_shared<PolicyNet>(1);
  LearnedPolicy p(net);
  SimResult r = simulate(trace(), Topology::uniform(6, 0), p);
  EXPECT_EQ(r.knows, "history");
  EXPECT_FALSE(r.traits.clairvoyant);
  for (const JobResult& j : r.jobs) EXPECT_GE(j.finish, j.submit + j.duration - 1e-6);
}

}  // namespace
}  // namespace ember::sched::learned
