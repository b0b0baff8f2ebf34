// bench/sched_knowledge: how much must a scheduler know about durations to come close to the
// oracle? SRSF ranks by true remaining service; a real scheduler has at best estimates. This runs
// SRSF on estimates of a chosen error (`srsf.estimates=1`, the trace's durations times
// exp(sigma x a standard normal draw), seeded) beside the oracle and the policies that know no
// durations (gittins, las) on the same trace and cluster, and prints each run's average JCT as a
// ratio to the oracle's. Three kinds of estimate:
//   - every job off by the same sigma;
//   - exact below 1e5 device-seconds, off by sigma above (the few long gangs that hold most of
//     the gap between gittins and srsf on Philly, docs/scheduler/policies.md);
//   - its "siblings'" median: the true durations of the jobs of the same queue and gang size
//     submitted in the `--window` seconds before it (a sweep's other runs), exact when it has
//     none. No scheduler has this at submission — the siblings are still running — so it is
//     an optimistic bound on what Philly's repeated jobs could tell.
// And two Gittins runs told more than a scheduler can know, though no job's own duration: the
// week's service distributions (per queue and gang size, ...) from the first arrival on, instead
// of learning them as jobs finish; and each sweep's distribution (a queue's jobs of one gang size
// each submitted within `--window` of the one before), trusted from 2 jobs on. Gittins is the
// best order for a known distribution (on one server), so these bound what any better learning of
// distributions could give.
// The second table gives the siblings' error by service decade. The reference is the oracle in
// the same run; results are deterministic (no timing), so one run each, medians over seeds.
//
//   sched_knowledge --trace ../shared/data/traces/philly_w41.csv [--gpus 256,320,384]
//                   [--node-gpus 0] [--seeds 3] [--window 3600]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/error.h"
#include "scheduler/policy.h"
#include "scheduler/sim/simulator.h"
#include "scheduler/sim/trace.h"
#include "scheduler/sim/trace_gen.h"
#include "tools/flags.h"
#include "tools/run_leaf.h"

using namespace ember;
using namespace ember::sched;
using bench::fmt;

namespace {

struct Args {
  std::string trace;
  std::vector<long> gpus = {256, 320, 384};
  int node_gpus = 0;
  int seeds = 3;
  double window = 3600;
};

Args parse(const tools::Flags& f) {
  Args a;
  a.trace = f.require("trace");
  if (f.has("gpus")) a.gpus = f.integers("gpus", 1, 100000000);
  a.node_gpus = static_cast<int>(f.integer("node-gpus", a.node_gpus, 0, 1000000));
  a.seeds = static_cast<int>(f.integer("seeds", a.seeds, 1, 1000));
  a.window = f.number("window", a.window, 1, 1e9);
  return a;
}

double service(const JobSpec& j) {
  return j.duration * j.gpus;
}

// The trace with every job's estimate = duration x exp(sigma(j) x N(0, 1)).
template <typename Sigma>
std::vector<JobSpec> noisy(std::vector<JobSpec> t, unsigned seed, const Sigma& sigma) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (JobSpec& j : t) {
    const double z = normal(rng);  // drawn for every job, so a job's draw does not depend on sigma
    j.estimate = j.duration * std::exp(sigma(j) * z);
  }
  return t;
}

// Each job's siblings' median duration (< 0: no sibling), from the jobs of its queue and gang
// size submitted in the window before it. The trace is in submission order (read_trace sorts).
std::vector<double> sibling_medians(const std::vector<JobSpec>& t, double window) {
  std::map<std::pair<std::string, int>, std::vector<size_t>> groups;
  std::vector<double> med(t.size(), -1);
  for (size_t i = 0; i < t.size(); ++i) {
    std::vector<size_t>& g = groups[{t[i].queue, t[i].gpus}];
    std::vector<double> d;
    for (auto it = g.rbegin(); it != g.rend() && t[i].submit - t[*it].submit <= window; ++it)
      d.push_back(t[*it].duration);
    if (!d.empty()) med[i] = percentile(d, 0.5);
    g.push_back(i);
  }
  return med;
}

// The trace with each job's queue narrowed to its sweep: the run of jobs of the same queue and
// gang size each submitted within `window` seconds of the one before.
std::vector<JobSpec> by_sweep(std::vector<JobSpec> t, double window) {
  std::map<std::pair<std::string, int>, std::pair<double, long>> last;  // latest submission, sweep
  long sweeps = 0;
  for (JobSpec& j : t) {
    auto& [at, sweep] = last[{j.queue, j.gpus}];
    if (sweep == 0 || j.submit - at > window) sweep = ++sweeps;
    at = j.submit;
    j.queue.append("#").append(std::to_string(sweep));
  }
  return t;
}

// A policy that learns from finished jobs, told every job of the trace as finished before the
// first arrival and nothing after: it ranks by the week's own service distributions from the
// start instead of learning them as jobs finish. What better distribution learning (censoring,
// recency, priors) could at most give; no individual job's duration is known.
class Foresight final : public Policy {
 public:
  Foresight(std::unique_ptr<Policy> inner, const std::vector<JobSpec>& trace) : inner_(std::move(inner)) {
    const JobId first = static_cast<JobId>(trace.size());  // ids the simulation does not use
    for (size_t i = 0; i < trace.size(); ++i) {
      Job j;
      j.id = first + static_cast<JobId>(i);
      j.spec = trace[i];
      j.status = JobStatus::kDone;
      j.executed = trace[i].duration;
      j.finish = trace[i].submit + trace[i].duration;
      inner_->job_finished(j);
    }
  }
  std::string name() const override { return inner_->name() + "+foresight"; }
  PolicyTraits traits() const override { return inner_->traits(); }
  Decision decide(const SchedState& s) override { return inner_->decide(s); }
  double next_wakeup(const SchedState& s) const override { return inner_->next_wakeup(s); }
  void job_finished(const Job&) override {}
  void forget(JobId id) override { inner_->forget(id); }

 private:
  std::unique_ptr<Policy> inner_;
};

// `foresight`: the policy told the trace's jobs as finished up front (Foresight).
double avg_jct(const std::vector<JobSpec>& trace, const Topology& topo, const std::string& policy,
               const PolicyParams& params = {}, bool foresight = false) {
  std::unique_ptr<Policy> p = make_policy(policy, params);
  if (foresight) p = std::make_unique<Foresight>(std::move(p), trace);
  return simulate(trace, topo, *p).metrics.avg_jct;
}

// A row of the table: what the policy knows, the policy and the estimates it is given.
struct KnowledgeRow {
  std::string knows, what;
  std::function<std::vector<JobSpec>(unsigned)> make;  // null: a policy on the trace as it is
  std::string policy;
  bool seeded = true;                               // the estimates depend on the seed
  bool foresight = false;                           // the policy is told the (made) trace's jobs as finished up front
  PolicyParams params = {{"srsf.estimates", "1"}};  // for the policy, whichever it is
};

// The rows: the oracle, history, nothing, the week's distributions, and estimates of growing error
// (sib: each job's siblings' median duration, -1 where it has none). The rows' traces are made
// from `trace` and `sib`, which must outlive them.
std::vector<KnowledgeRow> knowledge_rows(const std::vector<JobSpec>& trace, const Args& a,
                                         const std::vector<double>& sib) {
  std::vector<KnowledgeRow> rows;
  rows.push_back({"durations", "srsf (the oracle)", nullptr, "srsf"});
  rows.push_back({"history", "gittins", nullptr, "gittins"});
  rows.push_back({"nothing", "las", nullptr, "las"});
  rows.push_back({"week's dist.",
                  "gittins, the week's distributions from the start",
                  [&](unsigned) { return trace; },
                  "gittins",
                  false,
                  true,
                  {}});
  rows.push_back({"week's dist.",
                  "gittins, each sweep's distribution from the start",
                  [&](unsigned) { return by_sweep(trace, a.window); },
                  "gittins",
                  false,
                  true,
                  {{"gittins.min_history", "2"}}});
  for (double s : {0.1, 0.2, 0.3, 0.5, 0.7, 1.0})
    rows.push_back({"estimates", "every job off by sigma " + fmt(s, "%.1f"),
                    [&, s](unsigned seed) { return noisy(trace, seed, [s](const JobSpec&) { return s; }); }, "srsf"});
  for (double s : {0.4, 0.8, 1.2})
    rows.push_back({"estimates", "exact below 1e5 device-s, sigma " + fmt(s, "%.1f") + " above",
                    [&, s](unsigned seed) {
                      return noisy(trace, seed, [s](const JobSpec& j) { return service(j) >= 1e5 ? s : 0.0; });
                    },
                    "srsf"});
  rows.push_back({"estimates", "siblings' median (optimistic), exact without",
                  [&](unsigned) {
                    std::vector<JobSpec> t = trace;
                    for (size_t i = 0; i < t.size(); ++i) t[i].estimate = sib[i] >= 0 ? sib[i] : t[i].duration;
                    return t;
                  },
                  "srsf", false});
  return rows;
}

// Each row's average JCT on each cluster size as a ratio to SRSF on true durations (the median of
// a.seeds draws where its estimates depend on the seed).
bench::Table knowledge_table(const std::vector<KnowledgeRow>& rows, const std::vector<JobSpec>& trace, const Args& a) {
  bench::Table t;
  t.header = {"knows", "policy / estimates"};
  for (long g : a.gpus) t.header.push_back(std::to_string(g) + " dev: avg/srsf");
  std::vector<double> oracle;
  for (long g : a.gpus) oracle.push_back(avg_jct(trace, Topology::uniform(static_cast<int>(g), a.node_gpus), "srsf"));
  for (const KnowledgeRow& r : rows) {
    std::vector<std::string> line = {r.knows, r.what};
    for (size_t k = 0; k < a.gpus.size(); ++k) {
      const Topology topo = Topology::uniform(static_cast<int>(a.gpus[k]), a.node_gpus);
      std::vector<double> v;
      if (!r.make) {
        v.push_back(avg_jct(trace, topo, r.policy));
      } else {
        const int draws = r.seeded ? a.seeds : 1;
        for (int s = 0; s < draws; ++s) v.push_back(avg_jct(r.make(1 + s), topo, r.policy, r.params, r.foresight));
      }
      line.push_back(fmt(bench::median(v) / oracle[k], "%.3f"));
    }
    t.rows.push_back(line);
    std::fprintf(stderr, "  %s\n", r.what.c_str());
  }
  return t;
}

// How well siblings predict, by service decade: median |log(siblings' median / duration)|.
void print_sibling_error(const std::vector<JobSpec>& trace, const std::vector<double>& sib) {
  std::printf("\nsiblings' error by service (device-seconds): median |log(siblings' median / duration)|\n\n");
  bench::Table e;
  e.header = {"service", "jobs", "with siblings", "median error", "as a sigma"};
  const double edges[] = {0, 1e3, 1e4, 1e5, INFINITY};
  for (int b = 0; b < 4; ++b) {
    std::vector<double> err;
    long n = 0;
    for (size_t i = 0; i < trace.size(); ++i) {
      const double sv = service(trace[i]);
      if (sv < edges[b] || sv >= edges[b + 1]) continue;
      ++n;
      if (sib[i] > 0 && trace[i].duration > 0) err.push_back(std::abs(std::log(sib[i] / trace[i].duration)));
    }
    const double m = err.empty() ? NAN : percentile(err, 0.5);
    // The median of |N(0, sigma)| is 0.6745 sigma.
    e.rows.push_back({b == 3 ? ">= 1e5" : ("< " + fmt(edges[b + 1], "%.0e")), std::to_string(n),
                      std::to_string(err.size()), fmt(m, "%.3f"), fmt(m / 0.6745, "%.2f")});
  }
  e.print();
}

}  // namespace

int main(int argc, char** argv) {
  tools::Flags f;
  f.add("trace", "FILE", "the job trace (required; durations known: the oracle's)")
      .add("gpus", "N,...", "cluster sizes (default 256,320,384)")
      .add("node-gpus", "K", "devices per node (default 0: one flat pool)")
      .add("seeds", "N", "noise draws per row, median kept (default 3)")
      .add("window", "S", "seconds before a job in which its siblings were submitted (default 3600)")
      .add("help", "", "show this help");
  const std::string usage = tools::usage_of("sched_knowledge --trace FILE [flags]", f);
  return tools::run_leaf("sched_knowledge", usage, [&]() -> int {
    f.parse(std::vector<std::string>(argv + 1, argv + argc));
    if (tools::help_asked(f, usage)) return 0;
    const Args a = parse(f);
    bench::print_cpu_line();
    const std::vector<JobSpec> trace = read_trace(a.trace);
    for (const JobSpec& j : trace)
      EMBER_CHECK(j.duration >= 0, "sched_knowledge: job ", j.name, " of ", a.trace,
                  " has no duration; the oracle needs every job's");
    const std::vector<double> sib = sibling_medians(trace, a.window);
    std::printf(
        "trace %s: %zu jobs, %s; average JCT as a ratio to SRSF on true durations; noisy rows: median of "
        "%d seeds\n\n",
        a.trace.c_str(), trace.size(),
        a.node_gpus ? (std::to_string(a.node_gpus) + "-device nodes").c_str() : "one flat pool", a.seeds);

    const std::vector<KnowledgeRow> rows = knowledge_rows(trace, a, sib);
    knowledge_table(rows, trace, a).print();
    print_sibling_error(trace, sib);
    return 0;
  });
}
