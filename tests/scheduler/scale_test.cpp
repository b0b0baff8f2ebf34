// What makes the simulator cheap at cluster scale must not change a single answer: the free-device
// counts that refuse hopeless placements at once, the preemptive list schedule that ranks no
// running job when every waiting one fits, and a running job's run time counted from its start.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "scheduler/cluster.h"
#include "scheduler/list_schedule.h"
#include "scheduler/policy.h"

namespace ember::sched {
namespace {

// Best fit as the scan of every node defines it: for one node, the tightest eligible node (least
// free, then least memory, then lowest index); across k nodes, placeable exactly when the k
// eligible nodes with the most free devices hold the gang.
std::optional<int> tightest_by_scan(const FreeMap& f, int gpus, double mem) {
  const Topology& t = f.topology();
  std::optional<int> best;
  for (int n = 0; n < t.num_nodes(); ++n) {
    if (f.free(n) < gpus || !t.eligible(n, mem)) continue;
    if (!best || f.free(n) < f.free(*best) ||
        (f.free(n) == f.free(*best) && t.node(n).mem_per_gpu < t.node(*best).mem_per_gpu))
      best = n;
  }
  return best;
}

bool fits_k_nodes_by_scan(const FreeMap& f, int gpus, double mem, int k) {
  std::vector<int> free;
  for (int n = 0; n < f.topology().num_nodes(); ++n)
    if (f.topology().eligible(n, mem)) free.push_back(f.free(n));
  std::sort(free.begin(), free.end(), std::greater<>());
  int sum = 0;
  for (int i = 0; i < k && i < static_cast<int>(free.size()); ++i) sum += free[i];
  return sum >= gpus;
}

void check_against_scan(const Topology& topo, uint64_t seed) {
  std::mt19937_64 rng(seed);
  FreeMap f(topo);
  std::vector<Placement> held;
  for (int step = 0; step < 3000; ++step) {
    int biggest = 0, top3 = 0;
    std::vector<int> by_size;
    for (int n = 0; n < topo.num_nodes(); ++n) {
      biggest = std::max(biggest, f.free(n));
      by_size.push_back(f.free(n));
    }
    std::sort(by_size.begin(), by_size.end(), std::greater<>());
    for (int i = 0; i < 3 && i < static_cast<int>(by_size.size()); ++i) top3 += by_size[i];
    ASSERT_EQ(f.max_free(), biggest) << "step " << step;
    ASSERT_EQ(f.top_free(3), top3) << "step " << step;

    const int gpus = 1 + static_cast<int>(rng() % 20);
    const double mem = (rng() % 3 == 0) ? 16.0 * (1 + rng() % 4) : 0.0;
    const int k = topo.min_nodes(gpus, mem);
    std::optional<Placement> p = f.best_fit(gpus, mem);
    if (k == 1) {
      std::optional<int> n = tightest_by_scan(f, gpus, mem);
      ASSERT_EQ(p.has_value(), n.has_value()) << "step " << step << ", " << gpus << " devices";
      if (p) {
        ASSERT_EQ(*p, (Placement{{*n, gpus}})) << "step " << step;
      }
    } else if (k > 1) {
      ASSERT_EQ(p.has_value(), fits_k_nodes_by_scan(f, gpus, mem, k)) << "step " << step << ", " << gpus;
    }
    if (p) {
      ASSERT_EQ(placement_problem(f, *p, gpus, mem), "");
      f.take(*p);
      held.push_back(*p);
    }
    // Give back about as often as taking succeeds, so the cluster goes through every fill level.
    if (!held.empty() && (rng() % 2 == 0 || !p)) {
      size_t i = rng() % held.size();
      f.give(held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    }
  }
}

TEST(FreeCounts, BestFitMaxFreeAndTopFreeMatchAScanOfEveryNode) {
  check_against_scan(Topology::uniform(96, 8), 1);                                         // counted, one memory size
  check_against_scan(Topology({{8, 16}, {4, 32}, {8, 0}, {2, 64}, {8, 16}, {6, 32}}), 2);  // counted, mixed
  check_against_scan(Topology({{300, 0}, {8, 0}, {4, 0}}), 3);  // a node too big to count: the scan alone
}

// A cluster with running jobs on it and jobs waiting, every job with a random rank.
struct Scene {
  // Running jobs take up to `fill` of the devices.
  Scene(uint64_t seed, int nodes, int waiting, double fill) : cluster(Topology::uniform(nodes * 8, 8)), rng(seed) {
    jobs.reserve(200);
    for (int i = 0; i < 200; ++i) {
      Job j;
      j.id = i;
      j.spec.name = std::string("j").append(std::to_string(i));
      j.spec.gpus = std::vector<int>{1, 1, 1, 2, 4, 8, 16}[rng() % 7];
      j.spec.submit = static_cast<double>(rng() % 1000);
      jobs.push_back(j);
      key.push_back(static_cast<double>(rng() % 50));
    }
    for (Job& j : jobs) {
      if (static_cast<int>(waiting_.size()) < waiting && rng() % 3 == 0) {
        j.status = JobStatus::kWaiting;
        waiting_.push_back(&j);
        continue;
      }
      auto p = cluster.free().best_fit(j.spec.gpus);
      if (!p || rng() % 4 == 0 || cluster.busy() + j.spec.gpus > fill * cluster.num_devices()) continue;
      j.status = JobStatus::kRunning;
      j.devices = cluster.allocate(j, *p);
      running_.push_back(&j);
    }
    std::sort(waiting_.begin(), waiting_.end(), [](const Job* a, const Job* b) {
      return a->spec.submit != b->spec.submit ? a->spec.submit < b->spec.submit : a->id < b->id;
    });
  }
  SchedState state() const {
    SchedState s;
    s.cluster = &cluster;
    s.waiting = waiting_;
    s.running = running_;
    return s;
  }
  Ranked rank(const Job& j) const {
    return {key[j.id], j.status == JobStatus::kWaiting ? 1.0 : 0.0, j.spec.submit, &j};
  }

  Cluster cluster;
  std::mt19937_64 rng;
  std::vector<Job> jobs;
  std::vector<double> key;
  std::vector<const Job*> waiting_, running_;
};

TEST(PreemptiveListSchedule, RankingTheRunningJobsOnlyWhenNeededDecidesTheSame) {
  int fast = 0, walked = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    // Full clusters make the waiting jobs preempt or wait; half-full ones mostly let them all fit.
    Scene sc(seed, seed % 3 ? 4 : 40, 1 + static_cast<int>(seed % 6), seed % 2 ? 1.0 : 0.5);
    const SchedState s = sc.state();
    std::vector<Ranked> all, scratch;
    for (const Job* j : s.waiting) all.push_back(sc.rank(*j));
    for (const Job* j : s.running) all.push_back(sc.rank(*j));
    const Decision full = list_schedule(s, all, {.preemptive = true});
    const Decision lazy = list_schedule_preemptive(
        s, [&](const Job& j) { return sc.rank(j); }, scratch);
    // The batch form (a network scoring many jobs at once) asks for the running jobs' ranks only
    // on the way that walks them.
    size_t asked = 0;
    const Decision batch = list_schedule_preemptive_batch(
        s,
        [&](std::span<const Job* const> waiting, std::span<const Job* const> running, std::vector<Ranked>& out) {
          asked += waiting.size() + running.size();
          for (const Job* j : waiting) out.push_back(sc.rank(*j));
          for (const Job* j : running) out.push_back(sc.rank(*j));
        },
        scratch);
    for (const Decision* d : {&lazy, &batch}) {
      ASSERT_EQ(d->preempt, full.preempt) << "seed " << seed;
      ASSERT_EQ(d->start.size(), full.start.size()) << "seed " << seed;
      for (size_t i = 0; i < full.start.size(); ++i) {
        ASSERT_EQ(d->start[i].job, full.start[i].job) << "seed " << seed;
        ASSERT_EQ(d->start[i].placement, full.start[i].placement) << "seed " << seed;
      }
    }
    // Which way it went: every waiting job fitting on the free devices is the way that ranks no
    // running job.
    int want = 0;
    for (const Job* j : s.waiting) want += j->spec.gpus;
    const bool all_fit =
        want <= s.cluster->free().total_free() && full.preempt.empty() && full.start.size() == s.waiting.size();
    (all_fit ? fast : walked) += 1;
    if (!s.waiting.empty()) {
      EXPECT_EQ(asked, s.waiting.size() + (all_fit ? 0 : s.running.size())) << "seed " << seed;
    }
  }
  EXPECT_GT(fast, 20);  // both ways were exercised
  EXPECT_GT(walked, 20);
}

TEST(PreemptiveListSchedule, ABatchRankThatLosesJobsIsAnError) {
  Scene sc(3, 4, 3, 1.0);
  const SchedState s = sc.state();
  ASSERT_FALSE(s.waiting.empty());
  std::vector<Ranked> scratch;
  EXPECT_THROW(list_schedule_preemptive_batch(
                   s, [](std::span<const Job* const>, std::span<const Job* const>, std::vector<Ranked>&) {}, scratch),
               Error);
}

TEST(Job, ARunningJobsRunTimeCountsFromItsStart) {
  Job j;
  j.spec.gpus = 4;
  j.spec.duration = 100;
  j.spec.estimate = 120;
  j.executed = 30;  // before this run
  j.overhead = 10;
  j.status = JobStatus::kRunning;
  j.last_start = 1000;
  EXPECT_DOUBLE_EQ(j.executed_at(1025), 55);
  EXPECT_DOUBLE_EQ(j.attained(1025), 220);
  EXPECT_DOUBLE_EQ(j.work(1025), 45);
  EXPECT_DOUBLE_EQ(j.true_remaining(1025), 55);
  EXPECT_DOUBLE_EQ(j.estimated_remaining(1025), 75);
  EXPECT_DOUBLE_EQ(j.executed_at(990), 30);  // a clock before the start adds nothing
  j.status = JobStatus::kWaiting;            // not running: what it ran before is all
  EXPECT_DOUBLE_EQ(j.executed_at(1025), 30);
  EXPECT_DOUBLE_EQ(j.true_remaining(1025), 80);
}

}  // namespace
}  // namespace ember::sched
