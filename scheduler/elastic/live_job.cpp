#include "scheduler/elastic/live_job.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "scheduler/elastic/app_model.h"

namespace ember::sched::elastic {

LiveJob::LiveJob(int min, int max) : min_(min), max_(max) {
  EMBER_CHECK(min >= 1 && min <= max, "elastic job: expected 1 <= min <= max devices, got ", min, " and ", max);
}

void LiveJob::held(int ranks) {
  most_held_ = std::max(most_held_, ranks);
}

void LiveJob::report(int ranks, long batch, double steps_per_s, std::optional<double> noise_scale) {
  if (ranks < 1 || batch < ranks || !std::isfinite(steps_per_s) || steps_per_s <= 0) return;  // nothing to learn
  if (local_ == 0) {
    local_ = batch / ranks;
    init_batch_ = batch;
  }
  samples_per_s_[ranks] = steps_per_s * static_cast<double>(batch);
  if (noise_scale && std::isfinite(*noise_scale) && *noise_scale >= 0) noise_ = noise_scale;
  held(ranks);
}

long LiveJob::batch(int k) const {
  return local_ * k;
}

double LiveJob::lr_scale(int k) const {
  if (init_batch_ == 0 || k < 1) return 1.0;
  const double scale = static_cast<double>(batch(k)) / static_cast<double>(init_batch_);
  // No noise scale yet: AdaScale's limit of a noise-dominated gradient, the linear scaling rule
  // (the same optimism as efficiency()).
  if (!noise_) return scale;
  // The noise scale B_noise = init_batch * var / sqr (app_model.h's GradStats): sqr = 1.
  const GradStats g{1.0, *noise_ / static_cast<double>(init_batch_)};
  return progress_gain(g, scale);
}

double LiveJob::efficiency(int k) const {
  // Until a noise scale is measured (two ranks or more) a larger batch is assumed to lose nothing
  // (lr_scale() is then the scale itself): the optimism that lets a job try two ranks at all.
  if (init_batch_ == 0 || k < 1) return 1.0;
  return lr_scale(k) / (static_cast<double>(batch(k)) / static_cast<double>(init_batch_));
}

double LiveJob::throughput(int k) const {
  if (samples_per_s_.empty() || k < 1) return 0;
  if (auto it = samples_per_s_.find(k); it != samples_per_s_.end()) return it->second;
  // The nearest measured count below k, else above it.
  auto it = samples_per_s_.lower_bound(k);
  if (it == samples_per_s_.begin()) return it->second * k / it->first;
  --it;
  return it->second * k / it->first;
}

std::vector<double> LiveJob::goodput_table() const {
  std::vector<double> g(static_cast<size_t>(max_) + 1, 0.0);
  for (int k = 1; k <= max_; ++k) g[static_cast<size_t>(k)] = throughput(k) * efficiency(k);
  return g;
}

}  // namespace ember::sched::elastic
