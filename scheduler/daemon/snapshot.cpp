#include "scheduler/daemon/snapshot.h"

#include <algorithm>

namespace ember::sched {

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) - bounds.begin());
  ++buckets[i];  // bounds are inclusive upper bounds (le), as Prometheus's are
  sum += v;
  ++count;
}

std::vector<double> job_seconds_buckets() {
  return {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800};
}

std::vector<double> request_seconds_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace ember::sched
