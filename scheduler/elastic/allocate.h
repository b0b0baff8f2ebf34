// The goodput policy's GPU counts by greedy marginal value (docs/scheduler/elastic.md, "The goodput
// policy", step 2), apart from where the goodput tables come from: the simulator's goodput policy
// builds them from Pollux's measured models, the daemon from its elastic jobs' own reports
// (live_job.h). One allocator for both.
#pragma once

#include <vector>

namespace ember::sched::elastic {

struct CountRequest {
  // Elastic: goodput[k] on k GPUs, k = 0..most (goodput[0] unused; 0 where k is not valid);
  // the speedup is goodput[k] / goodput[1]. Rigid: `gpus` or nothing.
  std::vector<double> goodput;
  bool rigid = false;
  int gpus = 0;       // a rigid job's GPUs
  int held = 0;       // GPUs it holds now (0: none)
  int most = 0;       // the most it may get
  double weight = 1;  // least-attained-service weight
  double keep = 1;    // speedup factor of a count other than `held` when it holds some (restart cost)
};

// GPUs to each request, out of `free`: the next GPUs go to the request whose next step (up to
// `lookahead` GPUs ahead, or straight back to what it holds) adds most value per GPU, value being
// weight * S^p / p (log S at p = 0), until none is left or no step adds value.
std::vector<int> allocate_counts(const std::vector<CountRequest>& jobs, int free, double p, int lookahead);

}  // namespace ember::sched::elastic
