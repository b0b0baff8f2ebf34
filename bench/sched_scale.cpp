// bench/sched_scale: how the trace simulator's time grows with the number of jobs and devices.
// Synthetic traces drawn from a real week (`ember sched make-trace --jobs`: Poisson arrivals, the
// week's gang sizes and durations) at one offered load, jobs and devices grown together in steps
// of about 3x up to a million jobs on 100,000 devices, plus the same traces on 60% of the devices (a
// congested cluster, where jobs queue and the preemptive policies preempt), each policy in turn.
// There is no outside program to compare with, so the reference is the growth a good event
// simulator has, n log n: the `vs n log n` column is each row's seconds per (n log2 n) over the
// smallest row's of the same policy and load (1.0: grew as n log n; 10: ten times faster than that).
// Rows of 100,000 jobs and more run once (they take seconds to minutes); progress goes to stderr.
//
//   sched_scale --like ../shared/data/traces/philly_w41.csv [--max-jobs 1000000]
//               [--max-congested 100000] [--policies a,b] [--reps 3] [--load 0.9] [--node-gpus 8]
#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
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

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Args {
  std::string like;
  long max_jobs = 1000000;
  // The congested rows stop here by default: there the preemptive policies' decisions grow with the
  // running jobs (docs/scheduler/simulator.md, "Simulating at scale"), and a million jobs would take hours.
  long max_congested = 100000;
  std::vector<std::string> policies{"fcfs", "fcfs-backfill", "sjf", "priority", "srsf", "las", "gittins", "greedy"};
  int reps = 3;
  double load = 0.9;
  int node_gpus = 8;
};

// The command line, through the `ember` program's own flag parser: a malformed or unknown flag is
// a UsageError naming it.
Args parse(const tools::Flags& f) {
  Args a;
  a.like = f.require("like");
  a.max_jobs = f.integer("max-jobs", a.max_jobs, 10000, 100000000);
  a.max_congested = f.integer("max-congested", a.max_congested, 0, 100000000);
  if (f.has("policies")) a.policies = tools::split_commas(f.str("policies"));
  a.reps = static_cast<int>(f.integer("reps", a.reps, 1, 1000));
  a.load = f.number("load", a.load, 1e-6, 1e6);
  a.node_gpus = static_cast<int>(f.integer("node-gpus", a.node_gpus, 0, 1000000));
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  tools::Flags f;
  f.add("like", "FILE", "the week whose jobs the traces are drawn from (required)")
      .add("max-jobs", "N", "largest trace (default 1000000)")
      .add("max-congested", "N", "largest trace also run on 60% of the devices (default 100000)")
      .add("policies", "P,...", "policies to run (default: every non-search policy)")
      .add("reps", "N", "runs per row below 100,000 jobs, median kept (default 3)")
      .add("load", "L", "offered load on the full cluster (default 0.9)")
      .add("node-gpus", "K", "devices per node (default 8; 0: one flat pool)")
      .add("help", "", "show this help");
  const std::string usage = tools::usage_of("sched_scale --like FILE [flags]", f);
  return tools::run_leaf("sched_scale", usage, [&]() -> int {
    f.parse(std::vector<std::string>(argv + 1, argv + argc));
    if (tools::help_asked(f, usage)) return 0;
    const Args a = parse(f);
    bench::print_cpu_line();
    const std::vector<JobSpec> like = read_trace(a.like);
    std::printf(
        "jobs drawn from %s (%zu jobs), offered load %.2f on the full cluster, %d-device nodes, "
        "simulator CPU seconds (median of %d runs below 100,000 jobs, one run above)\n\n",
        a.like.c_str(), like.size(), a.load, a.node_gpus, a.reps);
    // Sizes: jobs and devices grown together (a device per 10 jobs) in steps of about 3x, each on
    // the full cluster and on 60% of it.
    std::vector<long> sizes;
    for (long n = 10000; n <= a.max_jobs; n *= 10) {
      sizes.push_back(n);
      if (3 * n <= a.max_jobs) sizes.push_back(3 * n);
    }
    bench::Table t;
    t.header = {"jobs",      "devices",     "offered",    "policy",    "CPU s",
                "decisions", "us/decision", "vs n log n", "avg JCT h", "peak RSS MiB"};
    std::map<std::string, double> base;  // policy|congested -> seconds per n log n at the smallest size
    for (long n : sizes) {
      const int full = static_cast<int>(n / 10);
      const std::vector<JobSpec> trace = synthetic_trace(like, n, full, a.load, 1);
      for (int congested = 0; congested < (n <= a.max_congested ? 2 : 1); ++congested) {
        const int gpus = congested ? full * 6 / 10 : full;
        const Topology topo = Topology::uniform(gpus, a.node_gpus);
        for (const std::string& name : a.policies) {
          std::vector<double> cpu;
          SimResult r;
          for (int rep = 0; rep < (n < 100000 ? a.reps : 1); ++rep) {
            auto policy = make_policy(name);
            r = simulate(trace, topo, *policy);
            cpu.push_back(r.cpu_seconds);
          }
          const double s = bench::median(cpu), nlogn = n * std::log2(static_cast<double>(n));
          const std::string key = name + (congested ? "|c" : "|f");
          if (!base.count(key)) base[key] = s / nlogn;
          t.rows.push_back({std::to_string(n), std::to_string(gpus), fmt("%.2f", offered_load(trace, gpus)), name,
                            fmt("%.3f", s), std::to_string(r.decisions), fmt("%.2f", 1e6 * s / r.decisions),
                            fmt("%.2f", (s / nlogn) / base[key]), fmt("%.2f", r.metrics.avg_jct / 3600),
                            fmt("%.0f", peak_rss_mib())});
          std::fprintf(stderr, "  %ld jobs, %d devices, %s: %.2f s\n", n, gpus, name.c_str(), s);
        }
      }
    }
    t.print();
    return 0;
  });
}
