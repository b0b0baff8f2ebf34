// Invariants of every policy on random traces: no device is ever given twice or beyond the
// cluster, every job finishes having done all its work, work-conserving policies never leave a
// device idle while a waiting job fits, non-preemptive ones never preempt, and strict FCFS
// starts jobs in submission order.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "sched_test_util.h"

namespace ember::sched {
namespace {

std::vector<JobSpec> random_trace(std::mt19937_64& rng, int n, int max_gpus) {
  const int widths[] = {1, 1, 1, 1, 2, 2, 3, 4, 6, 8};
  std::vector<JobSpec> jobs;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += rng() % 15;
    JobSpec j;
    j.name = "j";
    j.name += std::to_string(i);
    j.submit = t;
    j.gpus = std::min(max_gpus, widths[rng() % 10]);
    j.duration = 1 + rng() % 200;
    // Estimates off by up to 2x either way, sometimes missing.
    j.estimate = rng() % 6 == 0 ? -1 : j.duration * (0.5 + (rng() % 150) / 100.0);
    j.priority = static_cast<int>(rng() % 3);
    jobs.push_back(j);
  }
  return jobs;
}

struct Config {
  int gpus, node_gpus;
  double cost;
};

class Properties : public ::testing::TestWithParam<std::string> {};

TEST_P(Properties, HoldOnRandomTraces) {
  const std::string name = GetParam();
  const std::vector<Config> setups = {{8, 0, 0}, {16, 4, 0}, {16, 4, 7}, {12, 8, 3}};
  std::mt19937_64 rng(12345);
  int checked_decisions = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const Config& su = setups[trial % setups.size()];
    std::vector<JobSpec> jobs = random_trace(rng, 30, std::min(su.gpus, 8));
    Topology topo = Topology::uniform(su.gpus, su.node_gpus);
    // Odd trials with defragmenting migrations in every policy that has them (search policies
    // make them by default; even trials turn them off there).
    const std::string defrag = trial % 2 ? "1" : "0";
    auto policy = make_policy(name, {{"sa.iters", "50"},
                                     {"ga.generations", "4"},
                                     {"srsf.defrag", defrag},
                                     {"las.defrag", defrag},
                                     {"gittins.defrag", defrag},
                                     {"greedy.defrag", defrag},
                                     {"ilp.defrag", defrag},
                                     {"sa.defrag", defrag},
                                     {"ga.defrag", defrag}});
    const PolicyTraits traits = policy->traits();
    double last_fcfs_submit = -1;
    std::set<JobId> started_before;
    SimOptions o;
    o.preempt_cost = su.cost;
    o.observer = [&](const SchedState& s, const Decision& d) {
      ++checked_decisions;
      // Devices: each running job holds exactly its gang, no device twice, the count matches.
      std::set<int> held;
      int busy = 0;
      for (const Job* j : s.running) {
        ASSERT_EQ(static_cast<int>(j->devices.size()), j->spec.gpus) << name;
        for (int dev : j->devices) {
          ASSERT_TRUE(held.insert(dev).second) << name << ": device " << dev << " given twice";
          ASSERT_EQ(s.cluster->owner(dev), j->id) << name;
        }
        busy += j->spec.gpus;
      }
      ASSERT_LE(busy, su.gpus) << name;
      ASSERT_EQ(busy, s.cluster->busy()) << name;
      if (!traits.preemptive) {
        ASSERT_TRUE(d.preempt.empty()) << name << " preempted";
      }
      if (traits.work_conserving) {
        for (const Job* w : s.waiting)
          ASSERT_FALSE(s.cluster->free().best_fit(w->spec.gpus, w->spec.mem_per_gpu))
              << name << ": job " << w->spec.name << " (" << w->spec.gpus << " devices) waits at t=" << s.now
              << " though it fits";
      }
      if (name == "fcfs")
        for (const Start& st : d.start) {
          double sub = jobs[st.job].submit;
          ASSERT_GE(sub, last_fcfs_submit) << "fcfs started out of order";
          last_fcfs_submit = sub;
        }
    };
    SimResult r = simulate(jobs, topo, *policy, o);
    ASSERT_EQ(r.jobs.size(), jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobResult& j = r.jobs[i];
      EXPECT_GE(j.first_start, j.submit) << name;
      // All its work, and the work its preemptions cost, was done between submission and finish.
      EXPECT_NEAR(j.run_time, j.duration + j.preemptions * su.cost, 1e-6) << name << " " << j.name;
      EXPECT_GE(j.jct(), j.run_time - 1e-6) << name;
      if (!traits.preemptive) {
        EXPECT_EQ(j.preemptions, 0) << name;
      }
    }
  }
  EXPECT_GT(checked_decisions, 100);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, Properties, ::testing::ValuesIn(testing::every_policy()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ember::sched
