// bench/sched_scale: how the trace simulator's time grows with the number of jobs and devices.
// Synthetic traces drawn from a real week (`ember sched make-trace --jobs`: Poisson arrivals, the
// week's gang sizes and durations) at one offered load, jobs and devices grown together by 10x
// steps up to a million jobs on 100,000 devices, plus the same traces on 60% of the devices (a
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
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/error.h"
#include "scheduler/policy.h"
#include "scheduler/simulator.h"
#include "scheduler/trace.h"
#include "scheduler/trace_gen.h"

using namespace ember;
using namespace ember::sched;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
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
  // running jobs (docs/SCHEDULER.md, "Simulating at scale"), and a million jobs would take hours.
  long max_congested = 100000;
  std::vector<std::string> policies{"fcfs", "fcfs-backfill", "sjf", "priority", "srsf", "las", "gittins", "greedy"};
  int reps = 3;
  double load = 0.9;
  int node_gpus = 8;
};

// A flag's value as a number: the whole of it, or an ember::Error naming the flag.
double number(const std::string& flag, const std::string& v) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  EMBER_CHECK(used == v.size() && !v.empty(), flag, " expects a number, got '", v, "'");
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    EMBER_CHECK(i + 1 < argc, k, " needs a value");
    std::string v = argv[++i];
    if (k == "--like")
      a.like = v;
    else if (k == "--max-jobs")
      a.max_jobs = static_cast<long>(number(k, v));
    else if (k == "--max-congested")
      a.max_congested = static_cast<long>(number(k, v));
    else if (k == "--policies")
      a.policies = split(v);
    else if (k == "--reps")
      a.reps = static_cast<int>(number(k, v));
    else if (k == "--load")
      a.load = number(k, v);
    else if (k == "--node-gpus")
      a.node_gpus = static_cast<int>(number(k, v));
    else
      EMBER_FAIL("unknown flag ", k,
                 " (expected --like, --max-jobs, --max-congested, --policies, --reps, --load, --node-gpus)");
  }
  EMBER_CHECK(!a.like.empty(), "--like FILE (the week to draw jobs from) is required");
  EMBER_CHECK(a.max_jobs >= 10000 && a.max_jobs <= 100000000 && a.reps >= 1 && a.load > 0 && a.node_gpus >= 0,
              "expected --max-jobs in [10000, 1e8], --reps >= 1, --load > 0 and --node-gpus >= 0");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main("sched_scale", [&] {
    const Args a = parse(argc, argv);
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
