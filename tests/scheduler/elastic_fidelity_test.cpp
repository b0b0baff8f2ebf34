// Fidelity (issue 56, item 2): Ember's elastic simulator running the Tiresias policy on Pollux's
// eight workloads at load 1.0 reproduces the average JCTs the artifact published for its own
// simulator's Tiresias (../shared/data/pollux/README.md) within 5% per workload. Reads the shared
// data beside the checkout; about half a second.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "scheduler/elastic/simulator.h"

namespace ember::sched::elastic {
namespace {

std::string pollux_dir() {
  return (std::filesystem::path(EMBER_SOURCE_DIR) / "../shared/data/pollux").lexically_normal().string();
}

TEST(ElasticFidelity, TiresiasMatchesThePublishedJctsWithinFivePercent) {
  // The artifact's results-jobload/tiresias-1.0 averages, workloads 1..8 (seconds).
  const double published[8] = {2474, 5145, 3876, 3280, 3501, 3470, 5480, 5080};
  const std::map<std::string, AppModel> apps = load_apps(pollux_dir() + "/traces");
  double mean = 0;
  for (int w = 0; w < 8; ++w) {
    const std::string path = pollux_dir() + "/workloads/workload-" + std::to_string(w + 1) + ".csv";
    auto policy = make_elastic_policy("tiresias");
    const ElasticResult r = simulate_elastic(read_workload(path, apps), apps, *policy);
    std::printf("workload-%d: avg JCT %.0f s, published %.0f s (%+.2f%%)\n", w + 1, r.avg_jct, published[w],
                100 * (r.avg_jct / published[w] - 1));
    EXPECT_NEAR(r.avg_jct / published[w], 1.0, 0.05) << "workload-" << w + 1;
    mean += r.avg_jct / 8;
  }
  EXPECT_NEAR(mean / 4038.2, 1.0, 0.05);
}

}  // namespace
}  // namespace ember::sched::elastic
