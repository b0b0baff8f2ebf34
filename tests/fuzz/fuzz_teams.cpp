// Quota files (`ember sched simulate --quotas FILE`, scheduler/teams.h: "TEAM DEVICES" lines) on
// arbitrary text; the first two bytes are the cluster's capacity. Shares that load add up to at
// most the capacity, check jobs of their teams, and serve as the minimum shares of a plan.
#include "fuzz_support.h"
#include "scheduler/teams.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int capacity = data[0] | (data[1] << 8);
  const std::string text(reinterpret_cast<const char*>(data + 2), size - 2);
  fuzz::errors_only([&] {
    using namespace ember::sched;
    const Shares shares = parse_shares(text, "fuzz.quotas", capacity);
    long total = 0;
    for (const auto& share : shares) total += share.second;
    if (shares.empty() || total > capacity) std::abort();
    std::vector<JobSpec> jobs(1);
    jobs[0].name = "j", jobs[0].queue = shares.begin()->first, jobs[0].duration = 10;
    check_teams(jobs, shares, "fuzz");
    // The linear program's size grows with the teams: a few are enough to cover its use of them.
    if (shares.size() > 8) return;
    std::map<std::string, double> demand;
    for (const auto& share : shares) demand[share.first] = share.second + 1.5;
    const Shares plan = plan_shares(demand, capacity, shares);
    for (const auto& share : shares)
      if (plan.at(share.first) < share.second) std::abort();
  });
  return 0;
}
