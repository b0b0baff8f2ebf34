// A new policy is one file and one registry line. This file is both: the policy `narrowest`
// (smallest gang first) and its line, a PolicyRegistration, since it is built outside the library
// (a built-in policy's line goes in scheduler/registry.cpp). Nothing else changed for it, and the
// tests below check that everything that lists policies sees it: the list of names, aliases,
// `--compare`'s runs (inside teams too, being a ranking policy), the teams' message, and the
// property and option tests over every policy, which run on it as on the built-in ones.
#include "scheduler/registry.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "sched_test_util.h"
#include "scheduler/params.h"
#include "scheduler/ranking.h"
#include "scheduler/teams.h"

namespace ember::sched {
namespace {

class Narrowest final : public RankingPolicy {
 public:
  std::string name() const override { return "narrowest"; }
  PolicyTraits traits() const override { return {.clairvoyant = false, .preemptive = false, .work_conserving = true}; }
  Ranked rank(const Job& j, double) override { return {static_cast<double>(j.spec.gpus), j.spec.submit, 0, &j}; }
  Decision decide(const SchedState& s) override {
    std::vector<Ranked> ranked;
    for (const Job* j : s.waiting) ranked.push_back(rank(*j, s.now));
    return list_schedule(s, ranked);
  }
};

std::unique_ptr<Policy> make_narrowest(const PolicyParams& p) {
  ParamReader("narrowest", p).finish();
  return std::make_unique<Narrowest>();
}

const PolicyRegistration narrowest_line({.name = "narrowest",
                                         .make = make_narrowest,
                                         .aliases = {"smallest-gang"},
                                         .ranking = true,
                                         .compare_in_teams = true});

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Registry, ANewPolicyIsOneFileAndOneLine) {
  EXPECT_TRUE(has(policy_names(), "narrowest"));
  EXPECT_TRUE(has(testing::every_policy(), "narrowest"));
  EXPECT_TRUE(known_policy("smallest-gang"));
  EXPECT_EQ(make_policy("smallest-gang")->name(), "narrowest");
  EXPECT_TRUE(has(policy_aliases(), "smallest-gang"));
  EXPECT_TRUE(has(compare_runs(false, false, false), "narrowest"));
  EXPECT_TRUE(has(compare_runs(false, true, false), "narrowest+quota"));
  EXPECT_FALSE(has(compare_runs(false, false, false), "narrowest+pred"));  // not a clairvoyant order
  EXPECT_TRUE(has(ranking_policy_names(), "narrowest"));
  EXPECT_NE(testing::error_of([] {
              make_team_quotas(make_policy("greedy"), {{"a", 1}}, {});
            }).find("(the ones that do: fcfs, sjf, priority, las, gittins, themis, srsf, narrowest)"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { make_policy("narrowest", {{"narrowest.bogus", "1"}}); }), "");
  // The tests over every policy were instantiated for it.
  int instances = 0;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int k = 0; k < suite.total_test_count(); ++k)
      instances += std::string(suite.GetTestInfo(k)->name()).ends_with("/narrowest");
  }
  EXPECT_GE(instances, 2) << "the property and option tests over every policy";
}

// What an entry says of a policy is true of the policy it builds.
TEST(Registry, EntriesAgreeWithTheirPolicies) {
  for (const PolicyEntry& e : policy_registry()) {
    if (!e.listed) continue;
    const std::unique_ptr<Policy> p = make_policy(e.name);
    EXPECT_EQ(p->name(), e.name);
    EXPECT_EQ(dynamic_cast<RankingPolicy*>(p.get()) != nullptr, e.ranking) << e.name;
    if (e.compare_predicted) {
      EXPECT_TRUE(p->traits().clairvoyant) << e.name;
    }
    if (e.compare_in_teams) {
      EXPECT_TRUE(e.ranking) << e.name;
    }
    for (const std::string& a : e.aliases) EXPECT_EQ(make_policy(a)->name(), e.name) << a;
  }
}

TEST(Registry, NamesAndAliasesAreTakenOnce) {
  EXPECT_NE(testing::error_of([] {
              register_policy({.name = "fcfs", .make = make_narrowest});
            }).find("the name 'fcfs' is taken"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] {
              register_policy({.name = "narrowest2", .make = make_narrowest, .aliases = {"tiresias"}});
            }).find("the alias 'tiresias' is taken"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { register_policy({.name = "learned:x", .make = make_narrowest}); }), "");
  EXPECT_FALSE(known_policy("narrowest2"));
}

}  // namespace
}  // namespace ember::sched
