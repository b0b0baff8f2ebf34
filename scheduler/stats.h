// Order statistics over samples: what the reports, admission control and the duration predictors
// summarise their numbers with.
#pragma once

#include <span>
#include <vector>

namespace ember::sched {

// Linear interpolation between order statistics (p in [0, 1]); the input need not be sorted.
double percentile(std::vector<double> v, double p);
// The same of values already sorted (0 for none), without copying them.
double sorted_percentile(std::span<const double> sorted, double p);

}  // namespace ember::sched
