// Team quotas: the quota file, the static level's linear program on hand cases, the dynamic
// level's lending and reclaiming, and the fairness measures on schedules worked out by hand.
#include "scheduler/teams.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "sched_test_util.h"
#include "scheduler/lp.h"
#include "scheduler/policies/policies.h"
#include "scheduler/sim/fairness.h"
#include "scheduler/sim/report.h"

namespace ember::sched {
namespace {

using testing::count_of;
using testing::error_of;
using testing::job;

JobSpec team_job(const std::string& name, const std::string& team, double submit, int gpus, double duration) {
  JobSpec j = job(name, submit, gpus, duration);
  j.queue = team;
  return j;
}

SimResult run_quota(const std::string& inner, const std::vector<JobSpec>& jobs, int gpus, const Shares& shares,
                    QuotaOptions opt = {}) {
  auto p = make_team_quotas(make_policy(inner), shares, opt);
  return simulate(jobs, Topology::uniform(gpus, 0), *p);
}

TEST(Shares, FileLinesCommentsAndBlankLines) {
  Shares s = parse_shares("# team shares\nvision 8\n\n  speech\t4   # the ASR group\nborrower 0\n", "q", 16);
  EXPECT_EQ(s, (Shares{{"vision", 8}, {"speech", 4}, {"borrower", 0}}));
}

TEST(Shares, BadFilesNameTheLineAndWhatWasExpected) {
  EXPECT_NE(error_of([] { parse_shares("vision\n", "q.txt", 8); }).find("q.txt:1: expected 'TEAM DEVICES'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_shares("vision 4 extra\n", "q.txt", 8); }).find("q.txt:1: expected"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_shares("a 1\nvision four\n", "q.txt", 8);
            }).find("q.txt:2: team 'vision': expected a whole number of devices >= 0, got 'four'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_shares("vision -2\n", "q.txt", 8); }).find("got '-2'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shares("vision 2.5\n", "q.txt", 8); }).find("got '2.5'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shares("a 1\na 2\n", "q.txt", 8); }).find("q.txt:2: team 'a' has a share already"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_shares("a 6\nb 6\n", "q.txt", 8);
            }).find("the shares add up to 12 devices but the cluster has 8"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_shares("# nothing\n", "q.txt", 8); }).find("no teams"), std::string::npos);
  EXPECT_NE(error_of([] { read_shares("/nonexistent/quota", 8); }).find("cannot open"), std::string::npos);
}

TEST(Shares, UnknownTeamNamesTheJobAndTheTeams) {
  std::vector<JobSpec> jobs = {team_job("j1", "vision", 0, 1, 10), team_job("j2", "nlp", 0, 1, 10)};
  const std::string e = error_of([&] { check_teams(jobs, {{"vision", 2}, {"speech", 2}}, "quota file 'q'"); });
  EXPECT_NE(e.find("job 'j2' belongs to team 'nlp', which has no share in quota file 'q' (teams there: speech, "
                   "vision)"),
            std::string::npos)
      << e;
}

TEST(Shares, DemandIsDeviceSecondsOverTheArrivalWindow) {
  // Window 0..100 s: a keeps 2 devices busy for 50 s (1 on average), b 4 for 100 s (4).
  std::vector<JobSpec> jobs = {team_job("1", "a", 0, 2, 50), team_job("2", "b", 100, 4, 100)};
  auto d = team_demand(jobs);
  EXPECT_DOUBLE_EQ(d["a"], 1.0);
  EXPECT_DOUBLE_EQ(d["b"], 4.0);
}

TEST(LinearProgramTest, SolvesAHandCaseAndRefusesAnInfeasibleOne) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  // max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x <= 3: optimum x = 3, y = 1, value 11.
  LinearProgram lp;
  int x = lp.add_var(0, 3, 3), y = lp.add_var(0, kInf, 2);
  lp.add_row({{x, 1}, {y, 1}}, -kInf, 4);
  lp.add_row({{x, 1}, {y, 3}}, -kInf, 6);
  auto s = lp.maximize("hand case");
  EXPECT_NEAR(s.x[x], 3, 1e-9);
  EXPECT_NEAR(s.x[y], 1, 1e-9);
  EXPECT_NEAR(s.objective, 11, 1e-9);
  LinearProgram bad;
  int z = bad.add_var(0, 1, 1);
  bad.add_row({{z, 1}}, 2, kInf);
  EXPECT_NE(error_of([&] { bad.maximize("the impossible"); }).find("the impossible: the linear program is infeasible"),
            std::string::npos);
}

TEST(PlanShares, HandCases) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  auto plan = [](const std::map<std::string, double>& demand, int capacity, int least) {
    return plan_shares(demand, capacity, uniform_minimum(demand, least));
  };
  // Room for everyone: each gets its demand, the 8 left over go in proportion to demand.
  EXPECT_EQ(plan({{"a", 2}, {"b", 6}}, 16, 1), (Shares{{"a", 4}, {"b", 12}}));
  // Oversubscribed: the fairest split of the most satisfied demand is proportional.
  EXPECT_EQ(plan({{"a", 10}, {"b", 30}}, 20, 1), (Shares{{"a", 5}, {"b", 15}}));
  // A minimum share lifts a team above its demand; the rest goes to the other.
  EXPECT_EQ(plan({{"a", 0.1}, {"b", 100}}, 10, 2), (Shares{{"a", 2}, {"b", 8}}));
  // Per-team minimums: a's widest gang is 4 devices although its demand is small.
  std::vector<JobSpec> jobs = {team_job("1", "a", 0, 4, 1), team_job("2", "b", 0, 1, 10), team_job("3", "a", 5, 2, 1)};
  EXPECT_EQ(widest_gangs(jobs), (Shares{{"a", 4}, {"b", 1}}));
  EXPECT_EQ(plan_shares({{"a", 0.1}, {"b", 100}}, 10, widest_gangs(jobs)), (Shares{{"a", 4}, {"b", 6}}));
  // A team with no demand keeps its minimum.
  EXPECT_EQ(plan({{"a", 0}, {"b", 5}}, 10, 1), (Shares{{"a", 1}, {"b", 9}}));
  EXPECT_NE(error_of([&] {
              plan({{"a", 1}, {"b", 1}, {"c", 1}}, 5, 2);
            }).find("the minimum shares of the 3 teams add up to 6 devices but the cluster has 5"),
            std::string::npos);
}

TEST(PlanShares, WholeDevicesAddUpToTheCapacityAndKeepTheMinimum) {
  if (!have_lp_solver()) GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::map<std::string, double> demand;
    const int teams = 1 + static_cast<int>(rng() % 8);
    for (int t = 0; t < teams; ++t)
      demand[std::string(1, static_cast<char>('a' + t))] = std::uniform_real_distribution<>(0, 40)(rng);
    const int capacity = teams * 2 + static_cast<int>(rng() % 100);
    Shares s = plan_shares(demand, capacity, uniform_minimum(demand, 2));
    int total = 0;
    for (const auto& [t, n] : s) {
      EXPECT_GE(n, 2);
      total += n;
    }
    EXPECT_EQ(total, capacity) << "trial " << trial;
    double sum_demand = 0;
    for (const auto& [t, d] : demand) sum_demand += d;
    if (sum_demand <= capacity - 2 * teams) {  // room for all: nobody gets less than it asks for
      for (const auto& [t, d] : demand) EXPECT_GE(s[t] + 1e-9, std::floor(d)) << t;
    }
  }
}

// Shares 2 + 2 on 4 devices. Team a alone asks for 4 devices at t=0; team b asks for 2 at t=10.
std::vector<JobSpec> lend_and_reclaim() {
  return {team_job("a1", "a", 0, 1, 100), team_job("a2", "a", 0, 1, 100), team_job("a3", "a", 0, 1, 100),
          team_job("a4", "a", 0, 1, 100), team_job("b1", "b", 10, 1, 50), team_job("b2", "b", 10, 1, 50)};
}

TEST(TeamQuotas, LendsIdleShareAndTakesItBackWhenTheOwnerArrives) {
  for (const char* inner : {"fcfs", "sjf", "priority", "las", "gittins", "srsf"}) {
    SCOPED_TRACE(inner);
    SimResult r = run_quota(inner, lend_and_reclaim(), 4, {{"a", 2}, {"b", 2}});
    auto jct = testing::jcts(r);
    auto pre = testing::preemptions(r);
    // b's jobs start on arrival, on devices lent to a: exactly what b's share alone would give.
    EXPECT_DOUBLE_EQ(jct["b1"], 50);
    EXPECT_DOUBLE_EQ(jct["b2"], 50);
    // Two of a's jobs borrowed b's share and were preempted for it; they finish after b's jobs.
    int preempted = 0;
    for (const char* a : {"a1", "a2", "a3", "a4"}) preempted += pre[a];
    EXPECT_EQ(preempted, 2);
    EXPECT_EQ(r.counters.at("borrowed_preempted"), 2);
    EXPECT_EQ(r.counters.at("guaranteed_preempted"), 0);
    EXPECT_EQ(r.policy, std::string(inner) + "+quota");
    EXPECT_TRUE(r.traits.preemptive);
  }
}

// The strict level's promise, checked after every decision on random traces: on a flat pool
// without stop delays, no team is left with a waiting job that would fit within its share beside
// what the team runs (guaranteed jobs of all teams fit the cluster together, and borrowers give
// way).
TEST(TeamQuotas, StrictlyNoTeamWaitsWithinItsShare) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 24; ++trial) {
    const std::vector<std::string> inners = {"fcfs", "sjf", "priority", "las", "gittins", "srsf"};
    const std::string inner = inners[trial % inners.size()];
    SCOPED_TRACE(inner + " trial " + std::to_string(trial));
    std::vector<JobSpec> jobs;
    double t = 0;
    for (int i = 0; i < 60; ++i) {
      t += std::exponential_distribution<>(1.0 / 20)(rng);
      const std::string team(1, static_cast<char>('a' + rng() % 3));
      jobs.push_back(team_job(std::to_string(i), team, std::round(t), 1 + static_cast<int>(rng() % 4),
                              std::round(std::exponential_distribution<>(1.0 / 100)(rng)) + 1));
    }
    const int devices = 8;
    const int sa = static_cast<int>(rng() % 5), sb = static_cast<int>(rng() % (devices - sa + 1));
    const Shares shares = {{"a", sa}, {"b", sb}, {"c", devices - sa - sb}};
    auto p = make_team_quotas(make_policy(inner), shares, {.strict = 1});
    SimOptions o;
    int checked = 0;
    o.observer = [&](const SchedState& st, const Decision&) {
      std::map<std::string, int> used;
      for (const Job* j : st.running) used[j->spec.queue] += j->spec.gpus;
      for (const Job* j : st.waiting) {
        ASSERT_GT(used[j->spec.queue] + j->spec.gpus, shares.at(j->spec.queue))
            << "job " << j->spec.name << " of team " << j->spec.queue << " waits at t=" << st.now;
        ++checked;
      }
    };
    SimResult r = simulate(jobs, Topology::uniform(devices, 0), *p, o);
    for (const JobResult& j : r.jobs) EXPECT_GE(j.finish, j.submit + j.duration - 1e-6);
    EXPECT_GT(checked, 0);
  }
}

TEST(TeamQuotas, AGuaranteedJobWaitsTheGraceBeforeItReclaims) {
  SimResult r = run_quota("fcfs", lend_and_reclaim(), 4, {{"a", 2}, {"b", 2}}, {.grace = 5, .defrag = 0, .strict = 1});
  auto jct = testing::jcts(r);
  EXPECT_DOUBLE_EQ(jct["b1"], 55);  // waited 5 s, then took the devices back
  EXPECT_DOUBLE_EQ(jct["b2"], 55);
  // A grace longer than the borrowers need: they finish at t=100 and nobody is preempted.
  r = run_quota("fcfs", lend_and_reclaim(), 4, {{"a", 2}, {"b", 2}}, {.grace = 1000, .defrag = 0, .strict = 1});
  jct = testing::jcts(r);
  EXPECT_DOUBLE_EQ(jct["b1"], 140);
  EXPECT_EQ(r.counters.at("borrowed_preempted"), 0);
}

// Shares a 2, b 2, c 0 on 4 devices. Team a asks for 4 devices from t=0, twice its share; b for
// its 2 from t=100; c's one short job arrives at t=200.
std::vector<JobSpec> heavy_light_and_short() {
  return {team_job("a1", "a", 0, 1, 1000), team_job("a2", "a", 0, 1, 1000),   team_job("a3", "a", 0, 1, 1000),
          team_job("a4", "a", 0, 1, 1000), team_job("b1", "b", 100, 1, 1000), team_job("b2", "b", 100, 1, 1000),
          team_job("c1", "c", 200, 1, 10)};
}

TEST(TeamQuotas, ATeamAskingMoreThanItsShareOnAverageIsScheduledByThePolicyAlone) {
  const Shares shares = {{"a", 2}, {"b", 2}, {"c", 0}};
  // srsf: a policy under which a short job overtakes long ones at once (LAS's first queue would
  // keep c's job behind a's older ones whatever the teams).
  // Within quotas: a has asked for 4 devices on average against its 2, so its jobs have no
  // precedence; c's short job overtakes one of them by the policy's order, as without teams.
  // b asks for no more than its share: its jobs are guaranteed and never preempted.
  SimResult r = run_quota("srsf", heavy_light_and_short(), 4, shares);
  auto jct = testing::jcts(r);
  auto pre = testing::preemptions(r);
  EXPECT_DOUBLE_EQ(jct["c1"], 10);
  EXPECT_DOUBLE_EQ(jct["b1"], 1000);
  EXPECT_DOUBLE_EQ(jct["b2"], 1000);
  EXPECT_EQ(pre["b1"] + pre["b2"], 0);
  // The strict level keeps a's two guaranteed devices from c, whose job waits for one to end.
  r = run_quota("srsf", heavy_light_and_short(), 4, shares, {.strict = 1});
  jct = testing::jcts(r);
  EXPECT_GT(jct["c1"], 500);
  EXPECT_DOUBLE_EQ(jct["b1"], 1000);
  EXPECT_DOUBLE_EQ(jct["b2"], 1000);
}

// The demand is averaged, not read at the instant: a team whose jobs have asked for less than its
// share over the horizon keeps its guarantee through a burst above it. Team a asks for 1 device
// from t=0 to 1000, then for 3 (share 2) from t=1000; c's short job arrives at t=1010.
TEST(TeamQuotas, ABurstAboveTheShareKeepsTheGuaranteeWhileTheAverageIsWithinIt) {
  const Shares shares = {{"a", 2}, {"c", 0}};
  const std::vector<JobSpec> jobs = {team_job("a0", "a", 0, 1, 1000), team_job("a1", "a", 1000, 1, 500),
                                     team_job("a2", "a", 1000, 1, 500), team_job("a3", "a", 1000, 1, 500),
                                     team_job("c1", "c", 1010, 1, 10)};
  // 2 devices: a1 and a2 are a's guarantee; c1 (10 s) would overtake them under srsf alone.
  SimResult r = run_quota("srsf", jobs, 2, shares, {.horizon = 1e6});
  auto jct = testing::jcts(r);
  EXPECT_DOUBLE_EQ(jct["a1"], 500);
  EXPECT_DOUBLE_EQ(jct["a2"], 500);
  EXPECT_GT(jct["c1"], 400);
  // With a horizon of 1 s the burst is the demand: a asks for 3 against 2, and c1 overtakes.
  r = run_quota("srsf", jobs, 2, shares, {.horizon = 1});
  jct = testing::jcts(r);
  EXPECT_DOUBLE_EQ(jct["c1"], 10);
}

// A team comes back within its quota as its average decays, with no job arriving or ending then,
// and its waiting job reclaims a lent device at that moment. Shares a 2, c 0 on 2 devices, a
// horizon of 100 s. At t=0 team a asks for 4 devices (three 100 s jobs and a1) and c for 2 (c1,
// c2: 5000 s). By t=200 the short jobs are done and a, over its quota on average, has no
// precedence: srsf runs c1 and c2 ahead of a1 (6000 s). Asking for 1 device now, a's average falls
// under its share within a minute or so; a1 must then take a device back from c, not wait for c1
// to end at t=5100.
TEST(TeamQuotas, ATeamBackWithinItsQuotaReclaimsWithoutWaitingForAnEvent) {
  const std::vector<JobSpec> jobs = {team_job("s1", "a", 0, 1, 100),  team_job("s2", "a", 0, 1, 100),
                                     team_job("s3", "a", 0, 1, 100),  team_job("a1", "a", 0, 1, 6000),
                                     team_job("c1", "c", 0, 1, 5000), team_job("c2", "c", 0, 1, 5000)};
  SimResult r = run_quota("srsf", jobs, 2, {{"a", 2}, {"c", 0}}, {.horizon = 100});
  auto jct = testing::jcts(r);
  auto pre = testing::preemptions(r);
  EXPECT_GT(jct["a1"], 6200);  // it did wait behind c's jobs for a while
  EXPECT_LT(jct["a1"], 6600);  // and got a device back long before c1 ended
  EXPECT_EQ(pre["c1"] + pre["c2"], 1);
}

TEST(TeamQuotas, ATeamWithoutAShareOnlyBorrowsAndAJobWiderThanItsShareToo) {
  // c has share 0: its job runs on idle devices and gives them up to a's guaranteed job.
  std::vector<JobSpec> jobs = {team_job("c1", "c", 0, 2, 100), team_job("a1", "a", 10, 2, 10)};
  SimResult r = run_quota("fcfs", jobs, 2, {{"a", 2}, {"c", 0}});
  auto jct = testing::jcts(r);
  EXPECT_DOUBLE_EQ(jct["a1"], 10);
  EXPECT_DOUBLE_EQ(jct["c1"], 110);
}

TEST(TeamQuotas, NonRankingPoliciesAndUnknownTeamsAreErrors) {
  EXPECT_NE(error_of([] {
              make_team_quotas(make_policy("greedy"), {{"a", 1}});
            }).find("policy 'greedy' cannot run inside team quotas: it does not rank jobs"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              make_team_quotas(make_policy("fcfs-backfill"), {{"a", 1}});
            }).find("does not rank"),
            std::string::npos);
  std::vector<JobSpec> jobs = {team_job("x", "nlp", 0, 1, 10)};
  EXPECT_NE(error_of([&] {
              run_quota("las", jobs, 2, {{"a", 1}});
            }).find("job 'x' belongs to team 'nlp', which has no share (teams: a)"),
            std::string::npos);
  PolicyParams bad = {{"quota.graec", "1"}};
  EXPECT_NE(error_of([&] { quota_options(bad); }).find("graec"), std::string::npos);
  // A grace belongs to the strict level: the default under a non-preemptive policy, asked for
  // under a preemptive one.
  EXPECT_NE(error_of([&] {
              make_team_quotas(make_policy("srsf"), {{"a", 1}}, quota_options({{"quota.grace", "60"}}));
            }).find("quota.grace=60: policy 'srsf+quota' runs within quotas"),
            std::string::npos);
  EXPECT_NO_THROW(
      make_team_quotas(make_policy("srsf"), {{"a", 1}}, quota_options({{"quota.grace", "60"}, {"quota.strict", "1"}})));
  EXPECT_NO_THROW(make_team_quotas(make_policy("fcfs"), {{"a", 1}}, quota_options({{"quota.grace", "60"}})));
  bad = {{"quota.horizon", "0"}};
  EXPECT_NE(error_of([&] { quota_options(bad); }).find("quota.horizon"), std::string::npos);
  EXPECT_EQ(quota_options({{"quota.horizon", "3600"}}).horizon, 3600);
  bad = {{"quota.strict", "0.5"}};
  EXPECT_NE(error_of([&] { quota_options(bad); }).find("quota.strict=0.5: expected 0"), std::string::npos);
  EXPECT_NE(error_of([] {
              make_team_quotas(make_policy("las"), {{"a", 1}}, {.horizon = 0});
            }).find("expected a demand horizon > 0 seconds, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              make_team_quotas(make_policy("las"), {{"a", 1}}, {.strict = 2});
            }).find("expected strict -1 (by the policy), 0 or 1, got 2"),
            std::string::npos);
}

// Themis ranks the team that sharing hurts most first. One device: a1 runs from 0 to 100; b1
// (team b) arrives at 5, a2 and a3 (team a) at 10. When a1 ends, team a has 180 s in the system
// and none run, team b 95 s: a's rho estimate is higher, so a2 goes before b1, which LAS (both
// in its first queue, b1 older) would start first.
TEST(Themis, TheTeamSharingHurtsMostGoesFirst) {
  std::vector<JobSpec> jobs = {team_job("a1", "a", 0, 1, 100), team_job("b1", "b", 5, 1, 50),
                               team_job("a2", "a", 10, 1, 50), team_job("a3", "a", 10, 1, 50)};
  SimResult themis = testing::run("themis", jobs, 1);
  SimResult las = testing::run("las", jobs, 1);
  auto start = [](const SimResult& r, const std::string& name) {
    for (const JobResult& j : r.jobs)
      if (j.name == name) return j.first_start;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(start(themis, "a2"), 100);
  EXPECT_GT(start(themis, "b1"), 100);
  EXPECT_DOUBLE_EQ(start(las, "b1"), 100);
  EXPECT_EQ(themis.policy, "themis");
  EXPECT_FALSE(themis.traits.clairvoyant);
  // It ranks, so it runs inside team quotas too.
  EXPECT_EQ(make_team_quotas(make_policy("themis"), {{"a", 1}})->name(), "themis+quota");
}

TEST(Fairness, FinishTimeFairnessAndJainOnAHandSchedule) {
  // Two devices, shares 1 + 1, strict FCFS: a's two jobs (submitted first) run at 0-100, b's at
  // 100-200. Alone on one device each team's jobs finish at 100 and 200: average 150.
  std::vector<JobSpec> jobs = {team_job("a1", "a", 0, 1, 100), team_job("a2", "a", 0, 1, 100),
                               team_job("b1", "b", 0, 1, 100), team_job("b2", "b", 0, 1, 100)};
  const Shares shares = {{"a", 1}, {"b", 1}};
  SimResult shared = testing::run("fcfs", jobs, 2);
  int alone_runs = 0;
  Fairness f = measure_fairness(jobs, shared, shares, [&](const std::vector<JobSpec>& team, int gpus) {
    ++alone_runs;
    EXPECT_EQ(gpus, 1);
    return testing::run("fcfs", team, gpus);
  });
  EXPECT_EQ(alone_runs, 2);
  ASSERT_EQ(f.teams.size(), 2u);
  EXPECT_EQ(f.teams[0].team, "a");
  EXPECT_DOUBLE_EQ(f.teams[0].avg_jct, 100);
  EXPECT_DOUBLE_EQ(f.teams[0].alone_avg_jct, 150);
  EXPECT_NEAR(f.teams[0].rho, 2.0 / 3, 1e-12);
  EXPECT_NEAR(f.teams[1].rho, 4.0 / 3, 1e-12);
  EXPECT_NEAR(f.max_rho, 4.0 / 3, 1e-12);
  EXPECT_NEAR(f.min_rho, 2.0 / 3, 1e-12);
  EXPECT_NEAR(f.jain, 0.9, 1e-12);  // (2/3 + 4/3)^2 / (2 (4/9 + 16/9))
  // Per job: a1 100/100, a2 100/200, b1 200/100, b2 200/200.
  EXPECT_DOUBLE_EQ(f.job_rho_max, 2.0);
  EXPECT_DOUBLE_EQ(f.job_rho_p50, 1.0);
  // Demand: every job arrives at once, so the window is the whole span (200 s); each team's 200
  // device-seconds keep 1 device busy, its share, so no team is under its share.
  EXPECT_EQ(f.under_share_teams, 0);
  EXPECT_EQ(format_table({shared}).find("max rho"), std::string::npos);
  shared.fairness = std::make_shared<Fairness>(f);
  const std::string table = format_table({shared});
  EXPECT_NE(table.find("max rho"), std::string::npos);
  EXPECT_NE(format_teams({shared}).find("rho fcfs"), std::string::npos);
  const std::string svg = to_svg({shared}, "teams");
  EXPECT_NE(svg.find("rho per team"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<rect x="), 1u + 1u + 2u);  // the CDF frame, the bar frame, a bar per team
  EXPECT_NE(svg.find(">b</text>"), std::string::npos);
  EXPECT_NE(to_json({shared}).find("\"fairness\": {\"max_rho\": 1.3333333333333333"), std::string::npos);
  // A wide gang: its team's alone cluster is as wide as the gang.
  std::vector<JobSpec> wide = {team_job("w", "a", 0, 2, 10), team_job("n", "b", 0, 1, 10)};
  Fairness g =
      measure_fairness(wide, testing::run("fcfs", wide, 3), shares,
                       [&](const std::vector<JobSpec>& team, int gpus) { return testing::run("fcfs", team, gpus); });
  EXPECT_EQ(g.teams[0].alone_gpus, 2);
  EXPECT_EQ(g.teams[1].alone_gpus, 1);
}

// A team's share on a cluster of device types: each type in proportion, by largest remainder.
TEST(Shares, ASharesTypesAreInProportionToTheCluster) {
  auto text = [](const std::vector<DeviceType>& ts) {
    std::string s;
    for (const DeviceType& t : ts) s += (s.empty() ? "" : ",") + t.name + ":" + std::to_string(t.count);
    return s;
  };
  const std::vector<DeviceType> w41{{"h200", 64}, {"a100", 128}, {"v100", 128}};
  EXPECT_EQ(text(share_of_types(w41, 10)), "h200:2,a100:4,v100:4");
  EXPECT_EQ(text(share_of_types(w41, 320)), "h200:64,a100:128,v100:128");
  EXPECT_EQ(text(share_of_types(w41, 1)), "a100:1") << "the largest remainder; ties to the type listed first";
  const std::vector<DeviceType> even{{"a", 1}, {"b", 1}, {"c", 1}};
  EXPECT_EQ(text(share_of_types(even, 2)), "a:1,b:1");
  EXPECT_NE(error_of([&] { share_of_types(even, 0); }).find("expected 1 to 3 devices, got 0"), std::string::npos);
  EXPECT_NE(error_of([&] { share_of_types(even, 4); }).find("expected 1 to 3 devices, got 4"), std::string::npos);
}

}  // namespace
}  // namespace ember::sched
