#include "scheduler/stats.h"

#include <algorithm>
#include <cmath>

namespace ember::sched {

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return sorted_percentile(v, p);
}

double sorted_percentile(std::span<const double> v, double p) {
  if (v.empty()) return 0;
  double pos = p * (v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

}  // namespace ember::sched
