#include "scheduler/elastic/allocate.h"

#include <algorithm>
#include <cmath>

namespace ember::sched::elastic {

std::vector<int> allocate_counts(const std::vector<CountRequest>& jobs, int free, double p, int lookahead) {
  const size_t n = jobs.size();
  std::vector<int> k(n, 0);
  const auto utility = [p](double speedup) { return p == 0 ? std::log(speedup) : std::pow(speedup, p) / p; };
  const auto value = [&](size_t i, int g) {
    const CountRequest& j = jobs[i];
    if (g == 0) return p > 0 ? 0.0 : -1e6 * j.weight;
    const double speedup = j.rigid ? g : j.goodput[static_cast<size_t>(g)] / j.goodput[1];
    const double sp = speedup * (g == j.held || j.held == 0 ? 1.0 : j.keep);
    return j.weight * utility(sp);
  };
  while (free > 0) {
    double best = 1e-12;
    size_t who = n;
    int to = 0;
    for (size_t i = 0; i < n; ++i) {
      const CountRequest& j = jobs[i];
      const int top = std::min(j.most, k[i] + free);
      const int ahead = std::min(top, k[i] + lookahead);
      for (int g = k[i] + 1; g <= top; ++g) {
        if (g > ahead && g != j.held && !(j.rigid && g == j.gpus)) continue;
        if (j.rigid && g != j.gpus) continue;
        if (!j.rigid && (j.goodput[1] <= 0 || j.goodput[static_cast<size_t>(g)] <= 0)) continue;
        const double gain = (value(i, g) - value(i, k[i])) / (g - k[i]);
        if (gain > best) best = gain, who = i, to = g;
      }
    }
    if (who == n) break;
    free -= to - k[who];
    k[who] = to;
  }
  return k;
}

}  // namespace ember::sched::elastic
