#include "scheduler/gittins.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ember::sched {

ServiceDistribution::ServiceDistribution(std::vector<double> samples) : s_(std::move(samples)) {
  for (double v : s_)
    EMBER_CHECK(std::isfinite(v) && v >= 0, "Gittins index: a job's service must be a finite value >= 0, got ", v);
  std::sort(s_.begin(), s_.end());
  prefix_.resize(s_.size() + 1, 0.0);
  for (size_t i = 0; i < s_.size(); ++i) prefix_[i + 1] = prefix_[i] + s_[i];
}

double ServiceDistribution::index(double a) const {
  // Survivors are s_[lo..n); with quantum d = s_[j] - a the first k = j - lo + 1 of them finish:
  //   ratio = (k / m) / ((sum_{i<=j}(s_i - a) + (m - k) d) / m)
  // The m cancels. Equal samples end the same quantum, so only the last of a run is a candidate.
  const size_t n = s_.size();
  const size_t lo = static_cast<size_t>(std::upper_bound(s_.begin(), s_.end(), a) - s_.begin());
  double best = 0;
  for (size_t j = lo; j < n; ++j) {
    if (j + 1 < n && s_[j + 1] == s_[j]) continue;
    const double k = static_cast<double>(j - lo + 1), rest = static_cast<double>(n - j - 1);
    const double d = s_[j] - a;
    const double spent = (prefix_[j + 1] - prefix_[lo]) - k * a + rest * d;  // > 0: every s_i > a
    best = std::max(best, k / spent);
  }
  return best;
}

double ServiceDistribution::index(double a, std::span<const double> ends) const {
  const size_t n = s_.size();
  const size_t lo = static_cast<size_t>(std::upper_bound(s_.begin(), s_.end(), a) - s_.begin());
  double best = 0;
  for (double e : ends) {
    if (!(e > a)) continue;
    const size_t hi = std::isinf(e) ? n : static_cast<size_t>(std::upper_bound(s_.begin(), s_.end(), e) - s_.begin());
    if (hi == lo) continue;  // nobody finishes within this quantum
    const double k = static_cast<double>(hi - lo);
    double spent = (prefix_[hi] - prefix_[lo]) - k * a;
    if (hi < n) spent += static_cast<double>(n - hi) * (e - a);
    best = std::max(best, k / spent);
  }
  return best;
}

}  // namespace ember::sched
