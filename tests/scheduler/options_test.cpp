// Every policy, the shipped learned network included, under each of the simulator's options and
// their combinations (device types with per-model speeds, team quotas, admission control), on
// random traces: the invariants that hold under all of them. No device is given twice, no policy
// is shown a job before its submission, and every job is refused or runs after its submission.
// The options are combined as `ember sched simulate` combines them: a policy that does not rank
// runs without the team level under --quota (as its plain run beside the +quota ones).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <set>

#include "sched_test_util.h"
#include "scheduler/admission.h"
#include "scheduler/ranking.h"
#include "scheduler/speeds.h"
#include "scheduler/teams.h"

namespace ember::sched {
namespace {

using testing::job;

// Model "edge" runs 1.1 times as fast on both types: 33 s of its work end at t=29.999999999999996
// in floating point, just short of an arrival at t=30 (the float case of issue 48's abort).
const SpeedTable& speeds() {
  static const SpeedTable t = SpeedTable::parse("model,slow,fast\nedge,1.1,1.1\nx,1,1.1\ny,1,2.7\n", "test table");
  return t;
}

struct Option {
  bool typed = false, quota = false, admission = false;
};

std::string describe(const Option& o) {
  std::string s = o.typed ? "typed" : "flat";
  if (o.quota) s += "+quota";
  if (o.admission) s += "+admission";
  return s;
}

// 40 jobs of teams a, b and c after the edge pair: job "edge" (33 s of model edge at t=0) alone
// until "after_edge" arrives at t=30.
std::vector<JobSpec> random_trace(std::mt19937_64& rng) {
  std::vector<JobSpec> jobs = {job("edge", 0, 1, 33), job("after_edge", 30, 1, 50)};
  jobs[0].model = "edge";
  jobs[1].model = "x";
  double t = 40;
  const int widths[] = {1, 1, 1, 2, 2, 3, 4};
  for (int i = 0; i < 40; ++i) {
    t += static_cast<double>(rng() % 20);
    JobSpec j = job("j" + std::to_string(i), t, widths[rng() % 7], 1 + static_cast<double>(rng() % 300));
    j.model = rng() % 2 ? "x" : "y";
    j.priority = static_cast<int>(rng() % 3);
    jobs.push_back(j);
  }
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].queue = std::string(1, static_cast<char>('a' + i % 3));
  return jobs;
}

std::unique_ptr<Policy> make(const std::string& name, bool quota) {
  std::unique_ptr<Policy> p = make_policy(name, {{"sa.iters", "50"}, {"ga.generations", "4"}});
  if (quota && dynamic_cast<RankingPolicy*>(p.get()))
    p = make_team_quotas(std::move(p), {{"a", 3}, {"b", 3}, {"c", 2}});
  return p;
}

void check_run(const std::string& name, const Option& opt, const std::vector<JobSpec>& jobs) {
  SCOPED_TRACE(name + " " + describe(opt));
  const Topology topo = opt.typed ? Topology::typed({{"slow", 4}, {"fast", 4}}, 4) : Topology::uniform(8, 4);
  std::unique_ptr<Policy> p = make(name, opt.quota);
  const PolicyTraits traits = p->traits();
  SimOptions so;
  if (opt.typed) so.speed = [&topo](const JobSpec& j, int t) { return speeds().speed(j.model, topo.type_name(t)); };
  std::unique_ptr<AdmissionControl> control;
  if (opt.admission)
    so.admission =
        (control = std::make_unique<AdmissionControl>(AdmissionOptions{.target = 300, .max_defers = 2}, p.get())).get();
  long decisions = 0;
  so.observer = [&](const SchedState& s, const Decision& d) {
    ++decisions;
    std::set<int> held;
    for (const Job* j : s.running) {
      ASSERT_EQ(static_cast<int>(j->devices.size()), j->spec.gpus);
      for (int dev : j->devices) ASSERT_TRUE(held.insert(dev).second) << "device " << dev << " given twice";
      ASSERT_LE(j->spec.submit, s.now) << "job " << j->spec.name << " runs before its submission";
    }
    for (const Job* j : s.waiting)
      ASSERT_LE(j->spec.submit, s.now) << "job " << j->spec.name << " waits before its submission";
    ASSERT_EQ(static_cast<int>(held.size()), s.cluster->busy());
    if (!traits.preemptive) ASSERT_TRUE(d.preempt.empty());
  };
  SimResult r;
  ASSERT_NO_THROW(r = simulate(jobs, topo, *p, so));
  ASSERT_EQ(r.jobs.size(), jobs.size());
  EXPECT_GT(decisions, 0);
  for (const JobResult& j : r.jobs) {
    if (j.refused) continue;
    EXPECT_GE(j.first_start, j.submit) << j.name;
    EXPECT_GT(j.finish, j.first_start) << j.name;
  }
  if (opt.admission) {
    ASSERT_TRUE(r.admission.has_value());
    EXPECT_EQ(r.admission->admitted + r.admission->refused, static_cast<long>(jobs.size()));
  }
}

class EveryOption : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryOption, InvariantsHoldOnRandomTraces) {
  const std::vector<Option> options = {{.typed = true},
                                       {.quota = true},
                                       {.admission = true},
                                       {.typed = true, .quota = true},
                                       {.typed = true, .admission = true},
                                       {.quota = true, .admission = true},
                                       {.typed = true, .quota = true, .admission = true}};
  std::mt19937_64 rng(4848);
  for (int trial = 0; trial < 2; ++trial) {
    const std::vector<JobSpec> jobs = random_trace(rng);
    for (const Option& o : options) check_run(GetParam(), o, jobs);
  }
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, EveryOption, ::testing::ValuesIn(testing::every_policy()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

// The hand case on its own: a completion that floating point puts 4e-15 s before an arrival.
// The arrival is taken at its own second, so the learned policy is never asked about a job
// submitted after the decision, and the job does not start before its submission.
TEST(Arrivals, AJustEarlierCompletionDoesNotBringAnArrivalForward) {
  for (const std::string& name : testing::every_policy()) {
    SCOPED_TRACE(name);
    std::vector<JobSpec> jobs = {job("edge", 0, 1, 33), job("next", 30, 1, 10)};
    jobs[0].model = jobs[1].model = "edge";
    const Topology topo = Topology::typed({{"fast", 1}}, 1);
    std::unique_ptr<Policy> p = make(name, false);
    SimOptions so;
    so.speed = [&topo](const JobSpec& j, int t) { return speeds().speed(j.model, topo.type_name(t)); };
    SimResult r;
    ASSERT_NO_THROW(r = simulate(jobs, topo, *p, so));
    EXPECT_GE(r.jobs[1].first_start, 30);
  }
}

}  // namespace
}  // namespace ember::sched
