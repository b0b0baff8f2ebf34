// Admission control: the queueing formulas on cases with closed forms, M/M/c against the simulator
// itself, the look-ahead estimate on a state worked out by hand, and the rule (admit, defer,
// refuse) inside a simulation.
#include "scheduler/admission.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "sched_test_util.h"
#include "scheduler/policies/policies.h"
#include "scheduler/ranking.h"
#include "scheduler/sim/report.h"

namespace ember::sched {
namespace {

using testing::error_of;
using testing::job;

TEST(Queueing, ErlangCAndMeanWaitsHaveTheirClosedForms) {
  // M/M/1: an arrival waits with probability rho; W_q = rho / (mu - lambda).
  EXPECT_NEAR(erlang_c(1, 0.7), 0.7, 1e-12);
  EXPECT_NEAR(mmc_wait(1, 0.5, 1.0), 1.0, 1e-12);
  EXPECT_NEAR(mmc_wait(1, 0.9, 1.0), 9.0, 1e-9);
  // M/M/2 with a = 1: C = (a^2 / 2! x 2 / (2 - a)) / (1 + a + a^2 / 2! x 2 / (2 - a)) = 1/3;
  // W_q = C / (c mu - lambda) = 1/3.
  EXPECT_NEAR(erlang_c(2, 1.0), 1.0 / 3, 1e-12);
  EXPECT_NEAR(mmc_wait(2, 1.0, 1.0), 1.0 / 3, 1e-12);
  // M/M/3 with a = 2: C = 4/9 (the textbook value), W_q = C / (3 - 2) = 4/9 with mean service 1.
  EXPECT_NEAR(erlang_c(3, 2.0), 4.0 / 9, 1e-12);
  // M/D/1 (scv 0): Pollaczek-Khinchine, W_q = rho S / (2 (1 - rho)); M/G/1 with scv 1 is M/M/1.
  EXPECT_NEAR(mgc_wait(1, 0.5, 1.0, 0.0), 0.5, 1e-12);
  EXPECT_NEAR(mgc_wait(1, 0.5, 1.0, 1.0), mmc_wait(1, 0.5, 1.0), 1e-12);
  // Thousands of servers stay finite and below one.
  const double c = erlang_c(5000, 4900);
  EXPECT_GT(c, 0);
  EXPECT_LT(c, 1);
  // An overloaded queue never drains; a load at or above the servers has no Erlang C.
  EXPECT_EQ(mmc_wait(2, 3.0, 1.0), kInf);
  EXPECT_NE(error_of([] { erlang_c(2, 2.0); }).find("expected 0 <= offered load < servers"), std::string::npos);
  EXPECT_NE(error_of([] { mgc_wait(1, 0.5, 1.0, -1); }).find("squared coefficient of variation"), std::string::npos);
}

// The simulator running FCFS on c devices, one-device jobs arriving as a Poisson process with
// exponential run times, is M/M/c: its mean queueing delay matches the formula.
TEST(Queueing, TheSimulatorIsMMcUnderFcfs) {
  for (const auto& [c, a] : std::vector<std::pair<int, double>>{{1, 0.7}, {4, 3.0}}) {
    std::mt19937_64 rng(42);
    const double mean_service = 100, lambda = a / mean_service;
    std::exponential_distribution<> gap(lambda), service(1 / mean_service);
    std::vector<JobSpec> jobs;
    double t = 0;
    for (int i = 0; i < 60000; ++i) {
      t += gap(rng);
      jobs.push_back(job(std::to_string(i), t, 1, service(rng)));
    }
    SimResult r = testing::run("fcfs", jobs, c);
    double wait = 0;
    for (const JobResult& j : r.jobs) wait += j.first_start - j.submit;
    wait /= jobs.size();
    const double want = mmc_wait(c, lambda, mean_service);
    EXPECT_NEAR(wait / want, 1.0, 0.1) << c << " servers, load " << a << ": simulated " << wait << " s, M/M/c " << want;
  }
}

// Jobs 0-3 of queues a-d, waiting, submitted at t = 0, 1, 2, 3.
std::vector<Job> four_waiting_jobs() {
  std::vector<Job> jobs(4);
  const char* queues[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) {
    jobs[i].id = i;
    jobs[i].spec.name = queues[i];
    jobs[i].spec.queue = queues[i];
    jobs[i].spec.submit = i;
    jobs[i].status = JobStatus::kWaiting;
  }
  return jobs;
}

// An admission control whose predictor learned each queue's run time (three finishes each, at
// t < 0: a 100 s, b 300 s, c 50 s, d 10 s), told of the jobs' arrivals.
std::unique_ptr<AdmissionControl> trained_on_four_queues(AdmissionOptions o, Policy* p, const std::vector<Job>& jobs) {
  auto ac = std::make_unique<AdmissionControl>(o, p);
  int next_id = 100;
  for (const auto& [q, d] : std::vector<std::pair<std::string, double>>{{"a", 100}, {"b", 300}, {"c", 50}, {"d", 10}})
    for (int k = 0; k < 3; ++k) {
      Job f;
      f.id = next_id++;
      f.spec.queue = q;
      f.spec.submit = -2;
      ac->finished(f, d, -1);
    }
  for (const Job& j : jobs) ac->arrived(j, 0);
  return ac;
}

// A flat pool of 2 devices under FCFS: A (100 s) and B (300 s) run, C (50 s) waits. A new one-device
// job waits for C to start when A ends (t=100) and for C to end (t=150): 150 s.
TEST(Admission, LookAheadOnAHandState) {
  auto fcfs = make_policy("fcfs");
  std::vector<Job> jobs = four_waiting_jobs();
  auto trained = [&](AdmissionOptions o, Policy* p) { return trained_on_four_queues(o, p, jobs); };
  auto owned = trained({.target = 120}, fcfs.get());
  AdmissionControl& ac = *owned;
  Cluster cluster(Topology::uniform(2, 0));
  for (int i = 0; i < 2; ++i) {
    jobs[i].devices = cluster.allocate(jobs[i], {{0, 1}});
    jobs[i].status = JobStatus::kRunning;
    jobs[i].last_start = 0;
  }
  const Job* running[] = {&jobs[0], &jobs[1]};
  const Job* waiting[] = {&jobs[2]};
  SchedState s;
  s.now = 0;
  s.cluster = &cluster;
  s.running = running;
  s.waiting = waiting;
  StartEstimate e = ac.estimate(s, jobs[3]);
  EXPECT_DOUBLE_EQ(e.lookahead, 150);
  // M/G/c: 2 device-tasks to serve (C's and its own) on 2 devices with no free one: (2 - 1 +
  // (1 + scv) / 2) x E[S] / 2, E[S] and scv from the 12 finishes.
  const double es = ac.mean_service(), scv = ac.service_scv();
  EXPECT_DOUBLE_EQ(es, (3 * 100 + 3 * 300 + 3 * 50 + 3 * 10) / 12.0);
  EXPECT_NEAR(e.queueing, (1 + (1 + scv) / 2) * es / 2, 1e-9);
  // Over the 120 s target: deferred until the look-ahead has 120 s left (t = 30).
  AdmissionAnswer a = ac.decide(s, jobs[3], 0);
  EXPECT_EQ(a.verdict, Verdict::kDefer);
  EXPECT_DOUBLE_EQ(a.resubmit_at, 60);                            // never sooner than a minute
  EXPECT_EQ(ac.decide(s, jobs[3], 3).verdict, Verdict::kRefuse);  // deferred three times already
  EXPECT_EQ(trained({.target = 120, .refuse = true}, fcfs.get())->decide(s, jobs[3], 0).verdict, Verdict::kRefuse);
  EXPECT_EQ(trained({.target = 200}, fcfs.get())->decide(s, jobs[3], 0).verdict, Verdict::kAdmit);
  // Under LAS the new job outranks the running ones (they have run, it has not): it would take
  // a device at once by preemption.
  auto las = make_policy("las", {{"las.thresholds", "1"}});
  jobs[0].executed = jobs[1].executed = 10;
  EXPECT_DOUBLE_EQ(trained({.target = 120}, las.get())->estimate(s, jobs[3]).lookahead, 0);
  // What the FCFS estimate rests on: A's, B's and C's run times, learned from the 12 finishes.
  EXPECT_EQ(e.from_history, 3);
  EXPECT_EQ(e.from_prior + e.from_estimates, 0);
  EXPECT_EQ(estimate_basis(e), "from the run times of 12 jobs finished here");
  // With nothing finished the run times without a submitter's estimate are a prior guess, and the
  // basis says so: here A's estimate and a guess for B and C.
  AdmissionControl fresh({.target = 120, .use_estimates = true}, fcfs.get());
  jobs[0].spec.estimate = 100;
  for (const Job& j : jobs) fresh.arrived(j, 0);
  Job one;
  one.id = 99;
  fresh.finished(one, 50, 0);
  const StartEstimate g = fresh.estimate(s, jobs[3]);
  EXPECT_EQ(g.from_estimates, 1);
  EXPECT_EQ(g.from_prior, 2);
  EXPECT_EQ(estimate_basis(g),
            "a guess: only 1 job finished here so far, too few to learn run times from, so 2 jobs ahead without "
            "--expected are taken to run 1 h each");
  jobs[1].spec.estimate = jobs[2].spec.estimate = 10;
  AdmissionControl told({.target = 120, .use_estimates = true}, fcfs.get());
  for (const Job& j : jobs) told.arrived(j, 0);
  EXPECT_EQ(estimate_basis(told.estimate(s, jobs[3])), "from the --expected times of 3 jobs ahead");
}

TEST(Admission, AnArrivalWaitsUntilTheRunningJobFallsBehindItNotUntilItEnds) {
  // One device, held by a job that has run 10 s of the 1000 its queue's history predicts. The
  // arrival (not yet queued, as admission sees it) ties with it at the top rank under LAS and
  // Gittins, where a running job goes before a waiting one of the same rank: it waits until the
  // runner has attained enough to fall behind it (LAS's first threshold, 100 device-seconds;
  // Gittins' first bin edge, 60, as it has no history yet), not for the runner's end as FCFS does.
  Cluster cluster(Topology::uniform(1, 0));
  Job runner, arrival, waiter;
  runner.id = 0, arrival.id = 1;
  runner.spec.queue = arrival.spec.queue = "a";
  runner.spec.submit = 0, arrival.spec.submit = 10;
  runner.devices = cluster.allocate(runner, {{0, 1}});
  runner.status = JobStatus::kRunning;
  runner.last_start = 0;
  const Job* running[] = {&runner};
  SchedState s;
  s.now = 10;
  s.cluster = &cluster;
  s.running = running;
  auto lookahead = [&](Policy* p) {
    AdmissionControl ac({}, p);
    for (int k = 0; k < 3; ++k) {
      Job f;
      f.id = 100 + k;
      f.spec.queue = "a";
      ac.finished(f, 1000, -1);
    }
    ac.arrived(runner, 0);
    ac.arrived(waiter, 5);
    ac.arrived(arrival, 10);
    return ac.estimate(s, arrival).lookahead;
  };
  auto las = make_policy("las", {{"las.thresholds", "100,1000"}});
  auto gittins = make_policy("gittins");
  auto fcfs = make_policy("fcfs");
  EXPECT_NEAR(lookahead(las.get()), 90, 0.01);
  EXPECT_NEAR(lookahead(gittins.get()), 50, 0.01);
  EXPECT_DOUBLE_EQ(lookahead(fcfs.get()), 990);
  // A job of the same rank that was already waiting (submitted at 5) goes first, and from then on
  // holds the device as long as the runner did: until it too falls behind.
  waiter.id = 2;
  waiter.spec.queue = "a";
  waiter.spec.submit = waiter.queued_since = 5;
  waiter.status = JobStatus::kWaiting;
  const Job* waiting[] = {&waiter};
  s.waiting = waiting;
  EXPECT_NEAR(lookahead(las.get()), 90 + 100, 0.01);
  EXPECT_NEAR(lookahead(gittins.get()), 50 + 60, 0.01);
  EXPECT_DOUBLE_EQ(lookahead(fcfs.get()), 990 + 1000);
  // A runner that has already passed the threshold is behind the arrival: it gives way at once.
  s.waiting = {};
  runner.executed = 200;
  EXPECT_DOUBLE_EQ(lookahead(las.get()), 0);
}

TEST(Admission, TheSimulatorDefersAndRefusesAndReportsTheEstimates) {
  // One device; jobs of 100 s arrive every 10 s: the queue grows by 9 jobs per 100 s, so later
  // arrivals are estimated far over a 250 s target.
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 30; ++i) jobs.push_back(job(std::to_string(i), 10.0 * i, 1, 100));
  auto p = make_policy("fcfs");
  AdmissionControl ac({.target = 250, .max_defers = 1}, p.get());
  SimOptions o;
  o.admission = &ac;
  SimResult r = simulate(jobs, Topology::uniform(1, 0), *p, o);
  ASSERT_TRUE(r.admission.has_value());
  const AdmissionStats& a = *r.admission;
  EXPECT_GT(a.refused, 0);
  EXPECT_GT(a.deferrals, 0);
  EXPECT_EQ(a.admitted + a.refused, 30);
  long refused = 0;
  for (const JobResult& j : r.jobs) {
    if (j.refused) {
      ++refused;
      EXPECT_EQ(j.first_start, -1) << j.name;
      continue;
    }
    EXPECT_GE(j.admitted_at, j.submit) << j.name;
    EXPECT_GE(j.first_start, j.admitted_at) << j.name;
    EXPECT_GE(j.estimate_lookahead, 0) << j.name;
  }
  EXPECT_EQ(refused, a.refused);
  EXPECT_EQ(r.jobs[0].estimate_lookahead, 0);  // the first job finds the device free
  // The metrics leave refused jobs out.
  EXPECT_NEAR(
      r.metrics.avg_jct,
      [&] {
        double s = 0;
        for (const JobResult& j : r.jobs)
          if (!j.refused) s += j.jct();
        return s / a.admitted;
      }(),
      1e-9);
  EXPECT_NE(format_summary(r).find("admission        target 250.0 s"), std::string::npos);
  EXPECT_NE(format_table({r}).find("SLO met"), std::string::npos);
}

// Until a job has finished, the mean service time is the run-time predictor's prior, the one the
// simulator's `--set history.prior` sets: not a constant of admission's own.
TEST(Admission, TheMeanServiceBeforeAnyFinishIsThePredictorsPrior) {
  EXPECT_DOUBLE_EQ(AdmissionControl({.predictor = {.prior = 120}}, nullptr).mean_service(), 120);
  EXPECT_DOUBLE_EQ(AdmissionControl({}, nullptr).mean_service(), HistoryOptions{}.prior);
}

// A policy that keeps FCFS's order under another name, strictly or not: whether the look-ahead
// stops at the first waiting job that does not fit is the policy's trait, not its name.
class InOrder final : public RankingPolicy {
 public:
  explicit InOrder(bool strict) : strict_(strict) {}
  std::string name() const override { return "in-order"; }
  PolicyTraits traits() const override { return {.strict_order = strict_}; }
  Ranked rank(const Job& j, double) override { return {j.spec.submit, 0, 0, &j}; }
  Decision decide(const SchedState& s) override { return list_schedule_sorted(s, s.waiting, {.strict = strict_}); }

 private:
  bool strict_;
};

// 4 devices: A runs on 2 (100 s), the wide B (4 devices) waits. A new 1-device job starts at once
// unless the order is strict, when it waits behind B: past A's end.
TEST(Admission, AStrictOrderIsThePolicysTrait) {
  std::vector<Job> jobs = four_waiting_jobs();
  jobs[1].spec.gpus = 4;
  Cluster cluster(Topology::uniform(4, 0));
  jobs[0].spec.gpus = 2;
  jobs[0].devices = cluster.allocate(jobs[0], {{0, 2}});
  jobs[0].status = JobStatus::kRunning;
  jobs[0].last_start = 0;
  const Job* running[] = {&jobs[0]};
  const Job* waiting[] = {&jobs[1]};
  SchedState s;
  s.cluster = &cluster;
  s.running = running;
  s.waiting = waiting;
  InOrder strict(true), loose(false);
  EXPECT_GE(trained_on_four_queues({}, &strict, jobs)->estimate(s, jobs[3]).lookahead, 100);
  EXPECT_DOUBLE_EQ(trained_on_four_queues({}, &loose, jobs)->estimate(s, jobs[3]).lookahead, 0);
}

TEST(Admission, BadOptionsAreErrors) {
  EXPECT_NE(error_of([] { AdmissionControl({.target = -1}, nullptr); }).find("target start delay must be >= 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { AdmissionControl({.slo = 1.5}, nullptr); }).find("SLO must be a fraction"),
            std::string::npos);
  EXPECT_EQ(format_delay(0.2), "now");
  EXPECT_EQ(format_delay(40), "40 s");
  EXPECT_EQ(format_delay(35 * 60), "35 min");
  EXPECT_EQ(format_delay(150), "2 min 30 s");
  EXPECT_EQ(format_delay(120), "2 min");
  EXPECT_EQ(format_delay(2 * 3600 + 10 * 60), "2 h 10 min");
  EXPECT_EQ(format_delay(3600), "1 h");
}

}  // namespace
}  // namespace ember::sched
