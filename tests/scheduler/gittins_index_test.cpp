// The Gittins index against closed forms, and the gittins policy on hand-made traces.
#include "scheduler/gittins_index.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "tests/scheduler/sched_test_util.h"

namespace ember::sched {
namespace {

using testing::job;

TEST(GittinsIndex, TwoPointDistributionHandValues) {
  // Services 1 and 10, equally likely. At 0: a quantum of 1 finishes half the jobs for an expected
  // service of 1, ratio 1/2; a quantum of 10 finishes all for (1 + 10) / 2, ratio 2/11. At 2 only
  // the long job is left: 1/8. Past 10 nothing is known: 0.
  ServiceDistribution d({10, 1});
  EXPECT_DOUBLE_EQ(d.index(0), 0.5);
  EXPECT_DOUBLE_EQ(d.index(2), 1.0 / 8);
  EXPECT_DOUBLE_EQ(d.index(10), 0.0);
  // A quantum ending at 5 finishes the short job for an expected 1/2 + 5/2: ratio 1/6. One ending
  // at 20 finishes both for (1 + 10) / 2: 2/11, the better of the two.
  EXPECT_DOUBLE_EQ(d.index(0, std::vector<double>{5}), 1.0 / 6);
  EXPECT_DOUBLE_EQ(d.index(0, std::vector<double>{5, 20}), 2.0 / 11);
  EXPECT_DOUBLE_EQ(d.index(0, std::vector<double>{0.5}), 0.0);  // nobody ends within half a unit
  const std::vector<double> to_end = {INFINITY};
  EXPECT_DOUBLE_EQ(d.index(0, to_end), 2.0 / 11);
  EXPECT_DOUBLE_EQ(d.index(3, to_end), 1.0 / 7);
}

TEST(GittinsIndex, ExponentialIsMemorylessSoItsIndexIsConstant) {
  // For Exp(mean m), P(S - a <= d | S > a) / E[min(S - a, d) | S > a] = 1/m for every a and d.
  const double mean = 100;
  const int n = 20000;
  std::vector<double> s;
  for (int i = 1; i <= n; ++i) s.push_back(-mean * std::log(1.0 - static_cast<double>(i) / (n + 1)));
  ServiceDistribution d(s);
  std::vector<double> ends = {10, 30, 100, 300, INFINITY};
  for (double a : {0.0, 20.0, 60.0, 150.0}) {
    EXPECT_NEAR(d.index(a, ends) * mean, 1.0, 0.02) << "a=" << a;
  }
  // Over every quantum the discrete sample's index is the same constant, read at a sample.
  for (int i : {0, n / 4, n / 2}) EXPECT_NEAR(d.index(s[i]) * mean, 1.0, 0.05) << "sample " << i;
}

TEST(GittinsIndex, DecreasingHazardFavoursNewJobs) {
  // Most jobs are short and a few are very long (Philly's shape): a job that has run a while is
  // probably one of the long ones, so its index is lower than a new job's.
  std::vector<double> s(90, 10.0);
  s.insert(s.end(), 10, 10000.0);
  ServiceDistribution d(s);
  EXPECT_GT(d.index(0), 10 * d.index(20));
}

TEST(GittinsIndex, RejectsNegativeService) {
  try {
    ServiceDistribution d({1, -2});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("service must be a finite value >= 0, got -2"), std::string::npos);
  }
}

TEST(GittinsPolicy, LearnsThatLongRunnersAreRareAndLetsNewJobsOvertakeThem) {
  // One device. History: many jobs of 100 s; then a long job (5000 s) runs; a newcomer arrives
  // while it runs. Having seen that jobs end near 100 s, the policy knows the long runner, past
  // every finish in history, has index 0 and the newcomer a high one: the newcomer preempts it.
  std::vector<JobSpec> t;
  for (int i = 0; i < 20; ++i) t.push_back(job(std::string("h").append(std::to_string(i)), i * 100.0, 1, 100));
  t.push_back(job("long", 2000, 1, 5000));
  t.push_back(job("new", 2500, 1, 100));
  SimResult r = testing::run("gittins", t, 1, 0, 0, {{"gittins.promote", "0"}});
  auto j = testing::jcts(r);
  EXPECT_DOUBLE_EQ(j["new"], 100);
  EXPECT_DOUBLE_EQ(j["long"], 5100);
  EXPECT_EQ(r.knows, "history");
  EXPECT_FALSE(r.traits.clairvoyant);
}

TEST(GittinsPolicy, WithoutHistoryItRanksLikeLeastAttainedService) {
  // Before min_history jobs have finished there is no distribution: the least served job first.
  std::vector<JobSpec> t = {job("a", 0, 1, 1000), job("b", 500, 1, 100)};
  auto j = testing::jcts(testing::run("gittins", t, 1));
  EXPECT_DOUBLE_EQ(j["b"], 100);  // b, in the first bin while a is in the sixth, preempts a at once
  EXPECT_DOUBLE_EQ(j["a"], 1100);
}

TEST(GittinsPolicy, RejectsBadParameters) {
  EXPECT_THROW(make_policy("gittins", {{"gittins.ratio", "1"}}), Error);
  EXPECT_THROW(make_policy("gittins", {{"gittins.quantum", "5"}}), Error);
}

}  // namespace
}  // namespace ember::sched
