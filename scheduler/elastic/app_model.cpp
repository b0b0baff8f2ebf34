#include "scheduler/elastic/app_model.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/error.h"

namespace ember::sched::elastic {
namespace {

// Linear between the two values of `keys` around `x` (clamped to the ends): the bracketing pair
// and x's weight on the upper one.
template <typename K>
std::tuple<K, K, double> bracket(const std::vector<K>& keys, double x) {
  if (x <= keys.front()) return {keys.front(), keys.front(), 0.0};
  if (x >= keys.back()) return {keys.back(), keys.back(), 0.0};
  const auto hi = std::lower_bound(keys.begin(), keys.end(), x);
  if (*hi == x) return {*hi, *hi, 0.0};
  const K lo = *(hi - 1);
  return {lo, *hi, (x - lo) / static_cast<double>(*hi - lo)};
}

StepTime mix(StepTime a, StepTime b, double w) {
  return {a.step + (b.step - a.step) * w, a.sync + (b.sync - a.sync) * w};
}

constexpr double kInfProgress = 1e300;

}  // namespace

double progress_gain(const GradStats& g, double scale) {
  const double denom = g.var / scale + g.sqr;
  return denom > 0 ? (g.var + g.sqr) / denom : 1.0;
}

std::string placement_id(const Shape& shape) {
  Shape s;
  for (int g : shape)
    if (g > 0) s.push_back(g);
  Shape best = s;
  for (size_t i = 1; i < s.size(); ++i) {
    Shape r(s.begin() + static_cast<long>(i), s.end());
    r.insert(r.end(), s.begin(), s.begin() + static_cast<long>(i));
    best = std::min(best, r);
  }
  std::string id;
  for (int g : best) id += std::to_string(g);
  return id;
}

StepTime AppModel::Curve::at(double b) const {
  const auto [lo, hi, w] = bracket(local, b);
  const auto idx = [&](double v) { return std::lower_bound(local.begin(), local.end(), v) - local.begin(); };
  return mix(time[static_cast<size_t>(idx(lo))], time[static_cast<size_t>(idx(hi))], w);
}

StepTime AppModel::step_time(const Shape& shape, double local) const {
  int nodes = 0, replicas = 0;
  for (int g : shape)
    if (g > 0) ++nodes, replicas += g;
  EMBER_CHECK(replicas > 0, name_, ": a step time needs at least one GPU");
  const auto it = by_placement_.find(placement_id(shape));
  if (it != by_placement_.end()) return it->second.at(local);
  // The artifact's measurements stop at 16 nodes; more nodes of the same GPUs read as 16.
  return shape_time(std::min(nodes, 16), replicas, local);
}

// Between the GPU counts measured, linear in the GPU count (each at `nodes`, see below).
StepTime AppModel::shape_time(int nodes, int replicas, double local) const {
  const auto [lo, hi, w] = bracket(measured_counts_, replicas);
  return mix(replicas_time(nodes, lo, local), replicas_time(nodes, hi, local), w);
}

// At a measured GPU count: between the node counts measured with it, linear in the node count.
StepTime AppModel::replicas_time(int nodes, int replicas, double local) const {
  std::vector<int> spans;
  for (auto it = by_shape_.lower_bound({replicas, 0}); it != by_shape_.end() && it->first.first == replicas; ++it)
    spans.push_back(it->first.second);
  const auto [lo, hi, w] = bracket(spans, nodes);
  return mix(by_shape_.at({replicas, lo}).at(local), by_shape_.at({replicas, hi}).at(local), w);
}

GradStats AppModel::grad_stats(double batch, int epoch) const {
  EMBER_CHECK(batch >= limits_.init_batch - 1e-9 && batch <= limits_.max_batch + 1e-9, name_, ": batch ", batch,
              " is outside the validated range [", limits_.init_batch, ", ", limits_.max_batch, "]");
  EMBER_CHECK(epoch >= 0 && epoch < limits_.epochs, name_, ": epoch ", epoch, " is outside the measured run (",
              limits_.epochs, " epochs)");
  // The validated batches around `batch` (a policy asks this for every candidate: no copies).
  auto hi = validation_.lower_bound(static_cast<int>(std::ceil(batch - 1e-9)));
  if (hi == validation_.end()) --hi;
  auto lo = hi;
  if (hi->first > batch && hi != validation_.begin()) --lo;
  const double w = hi->first == lo->first ? 0.0 : (batch - lo->first) / (hi->first - lo->first);
  const GradStats a = lo->second.grad[static_cast<size_t>(epoch)];
  const GradStats b = hi->second.grad[static_cast<size_t>(epoch)];
  return {a.sqr + (b.sqr - a.sqr) * w, a.var + (b.var - a.var) * w};
}

double AppModel::progress_at(int epoch) const {
  EMBER_CHECK(epoch >= 0 && epoch <= limits_.epochs, name_, ": epoch ", epoch, " is outside the measured run (",
              limits_.epochs, " epochs)");
  if (epoch == 0) return 0.0;
  double p = kInfProgress;
  for (const auto& [b, v] : validation_) p = std::min(p, v.progress[static_cast<size_t>(epoch - 1)]);
  return p;
}

BatchConfig AppModel::rigid_config(int replicas, long batch) const {
  EMBER_CHECK(replicas >= 1 && batch >= 1, name_, ": a rigid job needs >= 1 GPU and a batch >= 1, got ", replicas,
              " GPUs and batch ", batch);
  constexpr double eps = 1e-8;  // the artifact's rounding tolerance
  const long local = static_cast<long>(std::ceil(static_cast<double>(batch) / replicas - eps));
  long accum = static_cast<long>(std::ceil(static_cast<double>(local) / limits_.max_local - eps)) - 1;
  // One GPU above the initial batch accumulates at least once: the artifact's rule (its gradient
  // statistics need two micro-batches to be estimated from).
  if (replicas == 1 && batch > limits_.init_batch) accum = std::max(accum, 1L);
  long atomic = static_cast<long>(std::ceil(static_cast<double>(local) / static_cast<double>(accum + 1) - eps));
  atomic = std::min(atomic, static_cast<long>(limits_.max_batch / (replicas * (accum + 1))));
  EMBER_CHECK(atomic >= 1, name_, ": batch ", batch, " on ", replicas,
              " GPUs leaves no sample per GPU within the "
              "largest validated batch ",
              limits_.max_batch);
  return {static_cast<int>(atomic), static_cast<int>(accum)};
}

}  // namespace ember::sched::elastic
