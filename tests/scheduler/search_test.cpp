// The search policies against their greedy start: same objective, never worse, strictly better
// where gangs make greedy packing fall short, and the decode of the greedy candidate is the greedy
// decision itself.
#include "scheduler/search.h"

#include <gtest/gtest.h>

#include <random>
#include <span>

#include "core/error.h"
#include "sched_test_util.h"

namespace ember::sched {
namespace {

// A hand-built scheduling state: a cluster, running jobs where best fit puts them, waiting jobs.
struct State {
  explicit State(Topology t) : cluster(std::move(t)) { jobs.reserve(2000); }
  Job& add(int gpus, double estimate, bool running, double executed = 0) {
    Job j;
    j.id = static_cast<JobId>(jobs.size());
    j.spec.name = std::string("j").append(std::to_string(j.id));
    j.spec.gpus = gpus;
    j.spec.duration = j.spec.estimate = estimate;
    j.spec.submit = static_cast<double>(j.id);
    j.executed = executed;
    j.status = running ? JobStatus::kRunning : JobStatus::kWaiting;
    jobs.push_back(j);
    Job& r = jobs.back();
    if (running) {
      auto p = cluster.free().best_fit(gpus);
      if (!p) throw std::logic_error("test state: running job does not fit");
      r.devices = cluster.allocate(r, *p);
    }
    return r;
  }
  // `count` jobs of random widths and estimates: each runs, part done, where best fit finds room
  // while more than `keep_free` devices stay free (and two times in three), else it waits.
  void add_random(std::mt19937_64& rng, std::span<const int> widths, int count, int keep_free) {
    for (int i = 0; i < count; ++i) {
      int g = widths[rng() % widths.size()];
      double est = 60 + rng() % 20000;
      auto p = cluster.free().best_fit(g);
      bool run = p && cluster.free().total_free() > keep_free && rng() % 3 != 0;
      add(g, est, run, run ? (rng() % 100) / 100.0 * est : 0);
    }
  }
  SchedState view(double cost = 0) {
    waiting.clear();
    running.clear();
    for (const Job& j : jobs) (j.status == JobStatus::kRunning ? running : waiting).push_back(&j);
    SchedState s;
    s.now = 1000;
    s.cluster = &cluster;
    s.waiting = waiting;
    s.running = running;
    s.preempt_cost = cost;
    return s;
  }
  Cluster cluster;
  std::vector<Job> jobs;
  std::vector<const Job*> waiting, running;
};

// Applies a decision to a copy of the cluster, failing the test if it is invalid.
void check_valid(const State& st, const Decision& d) {
  Cluster c(st.cluster.topology());
  for (const Job& j : st.jobs)
    if (j.status == JobStatus::kRunning && std::find(d.preempt.begin(), d.preempt.end(), j.id) == d.preempt.end())
      c.allocate(j, placement_of(c.topology(), j));
  for (const Start& s : d.start) {
    const Job& j = st.jobs[s.job];
    bool migrates = std::find(d.preempt.begin(), d.preempt.end(), j.id) != d.preempt.end();
    ASSERT_TRUE(j.status == JobStatus::kWaiting || migrates);
    c.allocate(j, s.placement);
  }
}

const char* kSearch[] = {"ilp", "sa", "ga"};

TEST(Search, KnapsackBeatsGreedy) {
  // Four free devices. Greedy takes x (3 devices, 1/10) first and then nothing fits; y + z (2
  // devices each, 1/16 each) are worth 0.125 > 0.1.
  State st(Topology::uniform(4, 0));
  st.add(3, 10, false);
  st.add(2, 16, false);
  st.add(2, 16, false);
  SchedState s = st.view();
  SearchObjective obj;
  Decision g = make_policy("greedy")->decide(s);
  EXPECT_DOUBLE_EQ(obj.score(s, g), 0.1);
  for (const char* name : kSearch) {
    Decision d = make_policy(name)->decide(s);
    EXPECT_DOUBLE_EQ(obj.score(s, d), 0.125) << name;
    check_valid(st, d);
  }
}

TEST(Search, PreemptsOnlyWhenWorthItsCost) {
  // Four devices held by r (4 devices, 100 s left). w (4 devices, 60 s) would finish sooner:
  // with free preemption swap them; with a 1000 s cost r keeps running (its penalty outweighs).
  State st(Topology::uniform(4, 0));
  st.add(4, 100, true);
  st.add(4, 60, false);
  SearchObjective cheap{0};
  for (const char* name : kSearch) {
    Decision d = make_policy(name)->decide(st.view(0));
    EXPECT_EQ(d.preempt, std::vector<JobId>{0}) << name;
    EXPECT_GT(cheap.score(st.view(0), d), 0) << name;
    d = make_policy(name)->decide(st.view(1000));
    EXPECT_TRUE(d.empty()) << name;
  }
}

TEST(Search, NeverWorseThanGreedyOnRandomStates) {
  std::mt19937_64 rng(7);
  const int widths[] = {1, 1, 1, 1, 1, 2, 2, 4, 8, 16};
  for (int trial = 0; trial < 20; ++trial) {
    State st(Topology::uniform(64, 8));
    st.add_random(rng, widths, 200, 6);
    const double cost = trial % 2 ? 60 : 0;
    SchedState s = st.view(cost);
    SearchObjective obj{cost};
    const double greedy = obj.score(s, make_policy("greedy")->decide(s));
    for (const char* name : kSearch) {
      Decision d = make_policy(name, {{std::string(name) + ".always", "1"}})->decide(s);
      check_valid(st, d);
      EXPECT_GE(obj.score(s, d), greedy - 1e-12) << name << " trial " << trial;
    }
  }
}

// The look-ahead by hand. One node of 2 devices: a (10 s left) runs; b (100 s) and c (5 s) wait.
TEST(Search, ProjectedCostByHand) {
  State st(Topology::uniform(2, 0));
  st.add(1, 10, true);    // a
  st.add(1, 100, false);  // b
  st.add(1, 5, false);    // c
  SchedState s = st.view();
  SearchProblem p;
  p.state = &s;
  for (const Job& j : st.jobs) p.order.push_back(&j);
  p.objective = {0, s.now, 1e6};
  const Decision start_c{{}, {{2, {{0, 1}}}}}, start_b{{}, {{1, {{0, 1}}}}};
  // c ends at 5, a at 10, b (started at 5) at 105.
  EXPECT_DOUBLE_EQ(p.projected_cost(start_c), 5 + 10 + 105);
  // b ends at 100, a at 10, c (started at 10) at 15.
  EXPECT_DOUBLE_EQ(p.projected_cost(start_b), 10 + 15 + 100);
  // Doing nothing: the projection starts the shortest waiting job at once, as start_c does.
  EXPECT_DOUBLE_EQ(p.projected_cost({}), 120);
  EXPECT_GT(p.score(start_c), p.score(start_b));
  // A horizon of 50 s: b counts 50.
  p.objective.horizon = 50;
  EXPECT_DOUBLE_EQ(p.projected_cost(start_c), 5 + 10 + 50);
  // Preempting a (cost 20: 30 s left) to start b and c: c at 5, a (restarted at 5) at 35, b at 100.
  p.objective = {20, s.now, 1e6};
  const Decision preempt_a{{0}, {{1, {{0, 1}}}, {2, {{0, 1}}}}};
  EXPECT_DOUBLE_EQ(p.projected_cost(preempt_a), 5 + 35 + 100);
}

// A reservation, by hand. Two nodes of 2: a (10 s left) runs on node 0, b (100 s) on node 1; a
// 2-device gang g (50 s) and a one-device s (30 s) wait, one device free on each node.
TEST(Search, AReservationHoldsANodeForAGangWhenWaitingPays) {
  State st(Topology::uniform(4, 2));
  const Job& a = st.add(1, 10, true);
  Job& b = st.add(1, 100, false);  // best fit would put it beside a: placed by hand on node 1
  b.status = JobStatus::kRunning;
  b.devices = st.cluster.allocate(b, {{1, 1}});
  const Job& g = st.add(2, 50, false);
  const Job& sj = st.add(1, 30, false);
  ASSERT_EQ(placement_of(st.cluster.topology(), a), (Placement{{0, 1}}));
  SchedState s = st.view();
  SearchProblem p;
  p.state = &s;
  p.order = {&st.jobs[0], &st.jobs[1], &sj, &g};
  p.window_end = p.order.size();
  p.objective = {0, s.now, 1e6};
  p.hold_for = &g;
  p.hold_options = {{0}};
  // Without one, s takes node 0 (best fit, lower node): g waits for s (30 s), ends at 80.
  EXPECT_DOUBLE_EQ(p.projected_cost({}, -1), 10 + 30 + 80 + 100);
  // Holding node 0 sends s to node 1; g starts when a ends (10 s) and ends at 60.
  EXPECT_DOUBLE_EQ(p.projected_cost({}, 0), 10 + 30 + 60 + 100);
  // The decision decoded with the hold starts s on node 1 and leaves node 0's device free.
  SearchProblem::Candidate c = p.greedy();
  EXPECT_EQ(p.decode(c).start.size(), 1u);
  EXPECT_EQ(p.decode(c).start[0].placement, (Placement{{0, 1}}));
  c.hold = 0;
  const Decision held = p.decode(c);
  ASSERT_EQ(held.start.size(), 1u);
  EXPECT_EQ(held.start[0].job, sj.id);
  EXPECT_EQ(held.start[0].placement, (Placement{{1, 1}}));
  EXPECT_GT(p.score(c), p.score(p.greedy()));
}

// A reservation for a gang that spans nodes. Four nodes of 2 devices: a (10 s left) and b (20 s)
// hold one device each of nodes 0 and 1, c and d (5000 s) nodes 2 and 3. Waiting: g (4 devices,
// 50 s: it needs two whole nodes) and s1, s2 (1 device, 1000 s each).
TEST(Search, AReservationHoldsNodesForAGangThatSpansThem) {
  State st(Topology::uniform(8, 2));
  const int node_of[] = {0, 1, 2, 3};
  const double left[] = {10, 20, 5000, 5000};
  for (int i = 0; i < 4; ++i) {
    Job& r = st.add(i < 2 ? 1 : 2, left[i], false);
    r.status = JobStatus::kRunning;
    r.devices = st.cluster.allocate(r, {{node_of[i], i < 2 ? 1 : 2}});
  }
  const Job& g = st.add(4, 50, false);
  st.add(1, 1000, false);
  st.add(1, 1000, false);
  SchedState s = st.view();
  SearchProblem p;
  p.state = &s;
  for (const Job& j : st.jobs) p.order.push_back(&j);
  p.window_end = p.order.size();
  p.objective = {0, s.now, 1e6};
  p.hold_for = &g;
  p.hold_options = {{0, 1}};
  // Without one, s1 and s2 take the free devices of nodes 0 and 1, and g waits for them: it ends
  // at 1050.
  EXPECT_DOUBLE_EQ(p.projected_cost({}, -1), 10 + 20 + 1000 + 1000 + 1050 + 5000 + 5000);
  // Holding nodes 0 and 1: g starts when b ends (20 s) and ends at 70; s1 and s2 follow.
  EXPECT_DOUBLE_EQ(p.projected_cost({}, 0), 10 + 20 + 70 + 1070 + 1070 + 5000 + 5000);
  SearchProblem::Candidate c = p.greedy();
  EXPECT_EQ(p.decode(c).start.size(), 2u);  // s1 and s2 on nodes 0 and 1
  c.hold = 0;
  EXPECT_TRUE(p.decode(c).empty());  // nowhere else to go: both wait
  EXPECT_GT(p.score(c), p.score(p.greedy()));
}

TEST(Search, NeverWorseThanGreedyUnderTheLookAhead) {
  std::mt19937_64 rng(11);
  const int widths[] = {1, 1, 1, 1, 2, 4, 8};
  for (int trial = 0; trial < 6; ++trial) {
    State st(Topology::uniform(32, 8));
    st.add_random(rng, widths, 60, 4);
    const double cost = trial % 2 ? 60 : 0, horizon = 7200;
    SchedState s = st.view(cost);
    SearchProblem p;
    p.state = &s;
    for (const Job& j : st.jobs) p.order.push_back(&j);
    p.objective = {cost, s.now, horizon};
    const double greedy = p.projected_cost(make_policy("greedy")->decide(s));
    for (const char* name : kSearch) {
      const std::string n(name);
      Decision d = make_policy(n, {{n + ".always", "1"}, {n + ".horizon", "7200"}, {"sa.iters", "60"}})->decide(s);
      check_valid(st, d);
      EXPECT_LE(p.projected_cost(d), greedy + 1e-6) << name << " trial " << trial;
    }
  }
}

// Where the completion rate and the look-ahead disagree, every search follows the look-ahead, ilp
// included (its program counts min(completion, horizon) at later start times too). Four devices;
// waiting: a (4 devices, 100 s), b (1 device, 50 s), c, d, e (1 device, 1000 s each). Greedy
// starts b, c, d, e (rate 1/50 + 3/1000 = 0.023) and a waits for them: completions 50, 1000 x 3,
// 1100, sum 4150 s. Starting a alone (rate 0.01) gives 100, then 150 and 1100 x 3: 3550 s.
TEST(Search, EverySearchFollowsTheLookAheadWhereTheCompletionRateDisagrees) {
  State st(Topology::uniform(4, 0));
  const JobId a = st.add(4, 100, false).id;
  st.add(1, 50, false);
  for (int k = 0; k < 3; ++k) st.add(1, 1000, false);
  SchedState s = st.view();
  SearchProblem p;
  p.state = &s;
  for (const Job& j : st.jobs) p.order.push_back(&j);
  p.objective = {0, s.now, 12800};
  const Decision greedy = make_policy("greedy")->decide(s);
  ASSERT_EQ(greedy.start.size(), 4u);
  EXPECT_DOUBLE_EQ(p.projected_cost(greedy), 4150);
  for (const char* name : kSearch) {
    const std::string n(name);
    // Without the look-ahead the completion rate keeps greedy's answer.
    EXPECT_EQ(make_policy(n)->decide(s).start.size(), 4u) << name;
    const Decision d = make_policy(n, {{n + ".horizon", "12800"}})->decide(s);
    check_valid(st, d);
    ASSERT_EQ(d.start.size(), 1u) << name;
    EXPECT_EQ(d.start[0].job, a) << name;
    EXPECT_DOUBLE_EQ(p.projected_cost(d), 3550) << name;
  }
}

TEST(Search, GreedyCandidateDecodesToTheGreedyDecision) {
  std::mt19937_64 rng(3);
  State st(Topology::uniform(32, 8));
  for (int i = 0; i < 80; ++i) {
    int g = 1 << (rng() % 4);
    bool run = st.cluster.free().best_fit(g) && rng() % 2;
    st.add(g, 100 + rng() % 5000, run, run ? 50 : 0);
  }
  SchedState s = st.view(30);
  Decision g = make_policy("greedy")->decide(s);
  SearchProblem p;
  p.state = &s;
  p.objective = SearchObjective{30};
  std::vector<Ranked> ranked;
  for (const Job* j : s.waiting) ranked.push_back({-p.objective.value(*j) / j->spec.gpus, 1, j->spec.submit, j});
  for (const Job* j : s.running)
    ranked.push_back({-(p.objective.value(*j) + p.objective.penalty(*j)) / j->spec.gpus, 0, j->spec.submit, j});
  std::sort(ranked.begin(), ranked.end());
  for (const Ranked& r : ranked) p.order.push_back(r.job);
  p.fixed = 10;
  p.window_end = 40;
  Decision d = p.decode(p.greedy());
  ASSERT_EQ(d.start.size(), g.start.size());
  for (size_t i = 0; i < d.start.size(); ++i) {
    EXPECT_EQ(d.start[i].job, g.start[i].job);
    EXPECT_EQ(d.start[i].placement, g.start[i].placement);
  }
  EXPECT_EQ(d.preempt, g.preempt);
}

TEST(Search, ParametersAreChecked) {
  EXPECT_THROW(make_policy("sa", {{"sa.iters", "0"}}), Error);
  EXPECT_THROW(make_policy("ga", {{"ga.population", "many"}}), Error);
  EXPECT_THROW(make_policy("ilp", {{"ilp.speed", "2"}}), Error);
  EXPECT_THROW(make_policy("ga", {{"ga.horizon", "-1"}}), Error);
  EXPECT_THROW(make_policy("greedy", {{"greedy.horizon", "3600"}}), Error);  // greedy never looks ahead
  EXPECT_THROW(make_policy("las", {{"las.thresholds", "100,50"}}), Error);
  EXPECT_NO_THROW(make_policy("las", {{"sa.iters", "5"}}));  // addressed to another policy
  try {
    make_policy("fifo");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown policy 'fifo': expected one of fcfs"), std::string::npos);
  }
  EXPECT_EQ(make_policy("backfill")->name(), "fcfs-backfill");
  EXPECT_EQ(make_policy("tiresias")->name(), "las");
}

}  // namespace
}  // namespace ember::sched
