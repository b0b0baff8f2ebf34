// `ember sched simulate --workload FILE --jobs-dir DIR`: Pollux-style elastic jobs (the job models
// of scheduler/elastic, docs/scheduler/elastic.md) under each elastic-simulator policy: per policy
// the average and p99 JCT, makespan, GPU utilisation, and the mean GPUs and batch per job.
#include <cstdio>
#include <iostream>

#include "scheduler/elastic/simulator.h"
#include "tools/command.h"
#include "tools/flags.h"
#include "tools/run_leaf.h"

namespace ember::tools {
namespace {

using namespace ember::sched::elastic;

void add_elastic_flags(Flags& f) {
  f.add("workload", "FILE", "Pollux-format workload CSV (name,time,application,num_replicas,batch_size[,rigid])")
      .add("jobs-dir", "DIR", "the apps' measured models, one folder each (../shared/data/pollux/traces)")
      .add("policy", "P[,P...]", "elastic-simulator policies (default: all)")
      .add("nodes", "N", "nodes in the cluster (default 16)")
      .add("node-gpus", "K", "GPUs per node (default 4)")
      .add("interval", "S", "seconds between scheduling rounds (default 60)")
      .add("restart-delay", "S", "seconds a (re)started job makes no progress (default 30)")
      .add("set", "POLICY.KEY=VALUE", "a policy parameter (goodput.p, goodput.las, goodput.explore, ...)", true)
      .add("help", "", "show this help");
}

ember::sched::PolicyParams read_params(const Flags& f) {
  ember::sched::PolicyParams p;
  for (const std::string& kv : f.all("set")) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || kv.find('.') > eq)
      throw UsageError("--set: expected POLICY.KEY=VALUE, got '" + kv + "'");
    p[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return p;
}

void print_row(const ElasticResult& r, bool elastic) {
  std::printf("%-10s %9.0f %9.0f %10.0f %6.3f", r.policy.c_str(), r.avg_jct, r.p99_jct, r.makespan, r.utilisation);
  if (elastic)
    std::printf(" %6.2f %8.0f %8.2f\n", r.mean_gpus, r.mean_batch, r.mean_restarts);
  else
    std::printf(" %6s %8s %8.2f\n", "-", "-", r.mean_restarts);
}

int run_elastic(const Flags& f) {
  SimConfig cfg;
  cfg.nodes = static_cast<int>(f.integer("nodes", 16, 1, 100000));
  cfg.gpus_per_node = static_cast<int>(f.integer("node-gpus", 4, 1, 9));
  cfg.interval = f.number("interval", 60, 1, 86400);
  cfg.restart_delay = f.number("restart-delay", 30, 0, 86400);
  const ember::sched::PolicyParams params = read_params(f);
  std::vector<std::string> names;
  for (const ElasticEntry& e : elastic_registry()) names.push_back(e.name);
  if (f.has("policy")) names = split_commas(f.str("policy"));
  const auto apps = load_apps(f.require("jobs-dir"));
  const auto workload = read_workload(f.require("workload"), apps);
  std::printf("workload %s: %zu jobs; %d nodes of %d GPUs; rounds of %.0f s, restarts %.0f s\n",
              f.str("workload").c_str(), workload.size(), cfg.nodes, cfg.gpus_per_node, cfg.interval,
              cfg.restart_delay);
  std::printf("%-10s %9s %9s %10s %6s %6s %8s %8s\n", "policy", "avg JCT", "p99 JCT", "makespan", "util", "GPUs",
              "batch", "restarts");
  for (const std::string& n : names) {
    auto policy = make_elastic_policy(n, params);
    bool elastic = false;
    for (const ElasticEntry& e : elastic_registry()) elastic = elastic || (e.name == n && e.elastic);
    print_row(simulate_elastic(workload, apps, *policy, cfg), elastic);
  }
  return 0;
}

}  // namespace

int sched_simulate_elastic(const std::vector<std::string>& args) {
  Flags f;
  add_elastic_flags(f);
  const std::string usage = usage_of("ember sched simulate --workload FILE --jobs-dir DIR [flags]", f);
  return run_leaf("ember sched simulate", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    return run_elastic(f);
  });
}

}  // namespace ember::tools
