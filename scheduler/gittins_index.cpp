#include "scheduler/gittins_index.h"

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
  return index(a, s_);  // for a discrete distribution the best quantum ends on a sample
}

size_t ServiceDistribution::above(double a) const {
  return static_cast<size_t>(s_.end() - std::upper_bound(s_.begin(), s_.end(), a));
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

GittinsHistory::GittinsHistory(GittinsHistoryOptions o) : o_(o) {
  EMBER_CHECK(o_.base > 0 && o_.ratio > 1, "Gittins history: bins need base > 0 and ratio > 1, got ", o_.base, " and ",
              o_.ratio);
  edges_.push_back(0);
  for (double e = o_.base; e < 1e13; e *= o_.ratio) edges_.push_back(e);
  ends_.assign(edges_.begin() + 1, edges_.end());
  ends_.push_back(INFINITY);
}

void GittinsHistory::add(const Job& j) {
  const double service = j.work(j.finish) * j.spec.gpus;
  for (Group* g : groups_of(j)) {
    if (!g) continue;
    g->samples.push_back(service);
    ++g->added;
    if (static_cast<double>(g->samples.size()) >= o_.min_history && g->added >= std::max(1.0, g->built * o_.refresh))
      rebuild(*g);
  }
  ++finished_;
}

void GittinsHistory::forget(JobId id) {
  of_job_.erase(id);
}

size_t GittinsHistory::bin(double attained) const {
  return static_cast<size_t>(std::upper_bound(edges_.begin(), edges_.end(), attained) - edges_.begin()) - 1;
}

double GittinsHistory::next_edge(double attained) const {
  auto it = std::upper_bound(edges_.begin(), edges_.end(), attained);
  return it == edges_.end() ? INFINITY : *it;
}

std::optional<double> GittinsHistory::index(const Job& j, double attained) {
  const size_t b = bin(attained);
  const std::array<Group*, kGroups>& gs = groups_of(j);
  for (const Group* g : gs)
    if (g && !g->index.empty() && (g == gs[kGroups - 1] || g->beyond[b] >= o_.min_history)) return g->index[b];
  return std::nullopt;
}

void GittinsHistory::rebuild(Group& g) {
  ServiceDistribution d(g.samples);
  g.index.resize(edges_.size());
  g.beyond.resize(edges_.size());
  for (size_t b = 0; b < edges_.size(); ++b) {
    g.index[b] = d.index(edges_[b], ends_);
    g.beyond[b] = static_cast<int>(d.above(edges_[b]));
  }
  g.built = static_cast<double>(g.samples.size());
  g.added = 0;
  ++rebuilds_;
}

const std::array<GittinsHistory::Group*, GittinsHistory::kGroups>& GittinsHistory::groups_of(const Job& j) {
  auto it = of_job_.find(j.id);
  if (it != of_job_.end()) return it->second;
  std::array<Group*, kGroups> g{};
  const std::array<std::string, kGroups> keys = history_groups(j.spec.queue, j.spec.gpus);
  for (size_t i = o_.by_group ? 0 : kGroups - 1; i < kGroups; ++i) g[i] = &groups_[keys[i]];
  return of_job_.emplace(j.id, g).first->second;
}

}  // namespace ember::sched
