// bench/sched_elastic: how long the elastic goodput policy takes to decide one scheduling round of
// 100 active jobs on 64 GPUs (issue 56's bound: 1 s), beside Tiresias deciding the same rounds as
// the reference. The 100 jobs are the first 100 of Pollux's workload-1, all submitted at time 0
// (so the first rounds hold all of them, as many as the cluster ever queues); each policy runs the
// whole workload, `reps` times, and the table gives the median over runs of each run's mean and
// worst round, and the spread (min-max) of the worst. Host time: noisy on a loaded machine.
//
//   sched_elastic ../shared/data/pollux [--reps 3]
#include <cstdio>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "core/error.h"
#include "scheduler/elastic/simulator.h"

using namespace ember::sched::elastic;

namespace {

void run(const std::string& policy, const std::vector<JobRequest>& jobs, const std::map<std::string, AppModel>& apps,
         int reps) {
  std::vector<double> mean, worst;
  long rounds = 0;
  for (int r = 0; r < reps; ++r) {
    auto p = make_elastic_policy(policy);
    const ElasticResult res = simulate_elastic(jobs, apps, *p);
    mean.push_back(res.decide_mean_s);
    worst.push_back(res.decide_max_s);
    rounds = res.rounds;
  }
  const auto [lo, hi] = std::minmax_element(worst.begin(), worst.end());
  std::printf("| %-9s | %6ld | %10.4f | %10.4f | %.4f-%.4f |\n", policy.c_str(), rounds, ember::bench::median(mean),
              ember::bench::median(worst), *lo, *hi);
}

}  // namespace

int main(int argc, char** argv) {
  if (ember::bench::help_requested(argc, argv, "usage: %s POLLUX_DATA_DIR [--reps N]\n")) return 0;
  return ember::bench::guarded_main(argv[0], [&] {
    EMBER_CHECK(argc >= 2, "usage: sched_elastic POLLUX_DATA_DIR [--reps N]");
    const int reps = argc >= 4 && std::strcmp(argv[2], "--reps") == 0 ? std::max(1, std::atoi(argv[3])) : 3;
    const std::string dir = argv[1];
    const auto apps = load_apps(dir + "/traces");
    std::vector<JobRequest> jobs = read_workload(dir + "/workloads/workload-1.csv", apps);
    jobs.resize(std::min<size_t>(jobs.size(), 100));
    for (JobRequest& j : jobs) j.submit = 0;
    ember::bench::print_cpu_line();
    std::printf("%zu jobs at time 0 on 16 nodes x 4 GPUs, %d runs each (host time, noisy)\n\n", jobs.size(), reps);
    std::printf("| policy    | rounds | mean round s | worst round s | worst, spread |\n|---|---|---|---|---|\n");
    for (const char* p : {"tiresias", "goodput"}) run(p, jobs, apps, reps);
    return 0;
  });
}
