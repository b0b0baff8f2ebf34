// `ember sched bench`: times one scheduling decision per policy on a large synthetic state: a
// cluster whose devices are mostly held by running jobs and a queue of many waiting jobs, both
// drawn from a trace's job shapes (or a built-in mix). Search policies are forced to search
// (their shortcut when greedy is provably optimal would otherwise make them as fast as greedy).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <random>

#include "core/error.h"
#include "scheduler/search.h"
#include "scheduler/sim/trace.h"
#include "tools/command.h"
#include "tools/flags.h"

namespace ember::tools {
namespace {

using namespace ember::sched;

std::vector<JobSpec> synthetic_shapes(std::mt19937_64& rng) {
  std::vector<JobSpec> v;
  std::lognormal_distribution<double> dur(7.5, 2.0);
  const int widths[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 16};
  for (int i = 0; i < 5000; ++i) {
    JobSpec j;
    j.gpus = widths[rng() % 20];
    j.duration = j.estimate = std::max(60.0, dur(rng));
    v.push_back(j);
  }
  return v;
}

// The waiting and running jobs of one decision: running jobs drawn from `shapes` until
// `free_target` devices are left, then `waiting_n` waiting ones.
struct Scene {
  explicit Scene(const Topology& topo) : cluster(topo) {}
  Cluster cluster;
  std::vector<Job> jobs;
  std::vector<const Job*> running, waiting;
};

constexpr double kNow = 1e6;

void fill_running(Scene& sc, const std::vector<JobSpec>& shapes, int free_target, int gpus, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  for (int tries = 0; sc.cluster.free().total_free() > free_target && tries < 100 * gpus; ++tries) {
    JobSpec s = shapes[rng() % shapes.size()];
    if (s.gpus > sc.cluster.free().total_free() - free_target) continue;
    auto p = sc.cluster.free().best_fit(s.gpus, s.mem_per_gpu);
    if (!p) continue;
    Job j;
    j.id = static_cast<JobId>(sc.jobs.size());
    j.spec = s;
    j.spec.name = std::string("r").append(std::to_string(j.id));
    j.spec.submit = kNow - 1000;
    j.status = JobStatus::kRunning;
    j.last_start = j.first_start = kNow - u(rng) * s.duration;  // executed: 0 before this run
    sc.jobs.push_back(std::move(j));
    sc.jobs.back().devices = sc.cluster.allocate(sc.jobs.back(), *p);
  }
}

void fill_waiting(Scene& sc, const std::vector<JobSpec>& shapes, const Topology& topo, int waiting_n,
                  std::mt19937_64& rng) {
  for (int i = 0; i < waiting_n; ++i) {
    JobSpec s = shapes[rng() % shapes.size()];
    if (topo.min_nodes(s.gpus, s.mem_per_gpu) < 0) continue;
    Job j;
    j.id = static_cast<JobId>(sc.jobs.size());
    j.spec = s;
    j.spec.name = std::string("w").append(std::to_string(j.id));
    j.spec.submit = kNow - 1000 + i;
    j.queued_since = j.spec.submit;
    j.status = JobStatus::kWaiting;
    sc.jobs.push_back(std::move(j));
  }
  for (const Job& j : sc.jobs) (j.status == JobStatus::kRunning ? sc.running : sc.waiting).push_back(&j);
}

double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Times `repeat` decisions of policy `name` (a fresh one each) and prints the medians.
void time_policy(const std::string& name, const PolicyParams& params, const SchedState& st, int repeat,
                 const SearchObjective& obj) {
  std::vector<double> ms, cpu;
  Decision d;
  for (int r = 0; r < repeat; ++r) {
    std::unique_ptr<Policy> p = make_policy(name, params);
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpu_ms();
    d = p->decide(st);
    cpu.push_back(cpu_ms() - c0);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("%-14s %12.3f %12.3f %8zu %9zu %14.6g\n", name.c_str(), ms[ms.size() / 2], cpu[cpu.size() / 2],
              d.start.size(), d.preempt.size(), obj.score(st, d));
}

std::vector<std::string> policies_to_time(Flags& f) {
  return f.has("policy") ? split_commas(f.str("policy")) : policy_names();
}

PolicyParams bench_params(Flags& f) {
  PolicyParams params;
  for (const std::string& kv : f.all("set")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError("--set: expected POLICY.KEY=VALUE, got '" + kv + "'");
    params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const char* search : {"ilp", "sa", "ga"}) params.try_emplace(std::string(search) + ".always", "1");
  return params;
}

int bench(Flags& f) {
  const int gpus = static_cast<int>(f.integer("gpus", 384, 1, 1'000'000));
  const int node_gpus = static_cast<int>(f.integer("node-gpus", 8, 0, 1'000'000));
  const int waiting_n = static_cast<int>(f.integer("waiting", 1000, 0, 10'000'000));
  const int free_target = static_cast<int>(f.integer("free", 32, 0, gpus));
  const int repeat = static_cast<int>(f.integer("repeat", 3, 1, 1000));
  const double cost = f.number("preempt-cost", 60, 0, 1e12);
  std::mt19937_64 rng(static_cast<std::uint64_t>(f.integer("seed", 1, 0, 1L << 62)));
  const std::vector<std::string> names = policies_to_time(f);
  const PolicyParams params = bench_params(f);

  std::vector<JobSpec> shapes = f.has("trace") ? read_trace(f.str("trace")) : synthetic_shapes(rng);
  Topology topo = Topology::uniform(gpus, node_gpus);
  Scene sc(topo);
  sc.jobs.reserve(gpus + waiting_n + 1);
  fill_running(sc, shapes, free_target, gpus, rng);
  fill_waiting(sc, shapes, topo, waiting_n, rng);
  SchedState st;
  st.now = kNow;
  st.cluster = &sc.cluster;
  st.running = sc.running;
  st.waiting = sc.waiting;
  st.preempt_cost = cost;
  std::printf(
      "decision over %zu waiting jobs, %zu running on %d devices (%d free) in %d node(s), preemption cost %g s\n",
      sc.waiting.size(), sc.running.size(), gpus, sc.cluster.free().total_free(), topo.num_nodes(), cost);
  std::printf("%-14s %12s %12s %8s %9s %14s\n", "policy", "wall ms", "CPU ms", "starts", "preempts", "objective");
  SearchObjective obj{cost};
  for (const std::string& name : names) time_policy(name, params, st, repeat, obj);
  std::printf("(objective: the search policies' score of each decision, scheduler/search.h; larger is better)\n");
  return 0;
}

}  // namespace

int sched_bench(const std::vector<std::string>& args) {
  Flags f;
  f.add("trace", "FILE", "draw job shapes (devices, durations) from this trace (default: a built-in mix)")
      .add("gpus", "N", "devices (default 384)")
      .add("node-gpus", "K", "devices per node (default 8)")
      .add("waiting", "W", "waiting jobs (default 1000)")
      .add("free", "F", "devices left free by the running jobs (default 32)")
      .add("policy", "P[,P...]", "policies to time (default: all)")
      .add("repeat", "R", "decisions timed per policy; the median is reported (default 3)")
      .add("preempt-cost", "S", "seconds per preemption (default 60)")
      .add("seed", "N", "random seed (default 1)")
      .add("set", "POLICY.KEY=V", "policy parameter (repeatable)", true)
      .add("help", "", "show this help");
  const std::string usage = usage_of("ember sched bench [flags]", f);
  return run_leaf("ember sched bench", usage, [&]() -> int {
    f.parse(args);
    if (help_asked(f, usage)) return 0;
    return bench(f);
  });
}

}  // namespace ember::tools
