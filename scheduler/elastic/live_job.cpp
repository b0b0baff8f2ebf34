#include "scheduler/elastic/live_job.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "scheduler/elastic/app_model.h"

namespace ember::sched::elastic {

namespace {

bool positive(double x) {
  return std::isfinite(x) && x > 0;
}

bool usable_noise(const std::optional<double>& b) {
  return b && std::isfinite(*b) && *b >= 0;
}

}  // namespace

LiveJob::LiveJob(int min, int max, long max_batch) : min_(min), max_(max), max_batch_(max_batch) {
  EMBER_CHECK(min >= 1 && min <= max, "elastic job: expected 1 <= min <= max devices, got ", min, " and ", max);
  EMBER_CHECK(max_batch >= 0, "elastic job: expected a max_batch >= 0 (0: none), got ", max_batch);
}

LiveJob::LiveJob(int min, int max, long max_batch, const Learned& learned) : LiveJob(min, max, max_batch) {
  // The batches come together or not at all: the learning-rate factor is their ratio.
  if (learned.local >= 1 && learned.init_batch >= learned.local) {
    l_.local = learned.local;
    l_.init_batch = learned.init_batch;
    for (const auto& [k, m] : learned.at)
      if (k >= 1 && k <= max && m.batch >= k && positive(m.step_s) && std::isfinite(m.sync_s) && m.sync_s >= 0 &&
          m.sync_s < m.step_s)
        l_.at[k] = m;
  }
  if (usable_noise(learned.noise_scale)) l_.noise_scale = learned.noise_scale;
  l_.most_held = std::clamp(learned.most_held, 0, max);
}

void LiveJob::held(int ranks) {
  l_.most_held = std::max(l_.most_held, ranks);
}

void LiveJob::report(int ranks, long batch, double steps_per_s, std::optional<double> noise_scale,
                     std::optional<double> sync_s) {
  if (ranks < 1 || batch < ranks || !positive(steps_per_s)) return;  // nothing to learn
  if (l_.local == 0) {
    l_.local = batch / ranks;
    l_.init_batch = batch;
  }
  const double step = 1.0 / steps_per_s;
  // A wait longer than the step cannot be; a bad figure counts as no wait (what one device has).
  const double sync =
      ranks > 1 && sync_s && std::isfinite(*sync_s) && *sync_s >= 0 ? std::min(*sync_s, 0.99 * step) : 0;
  l_.at[ranks] = Measured{batch, step, sync};
  if (usable_noise(noise_scale)) l_.noise_scale = noise_scale;
  held(ranks);
}

double LiveJob::step_time(int k, double m) const {
  if (l_.at.empty() || k < 1) return 0;
  auto it = l_.at.find(k);
  if (it == l_.at.end()) {
    it = l_.at.lower_bound(k);  // the nearest measured count below k, else above it
    if (it != l_.at.begin()) --it;
  }
  const int kk = it->first;
  const Measured& x = it->second;
  const double per_sample = (x.step_s - x.sync_s) / (static_cast<double>(x.batch) / kk);
  const double sync = k == 1 ? 0.0 : x.sync_s;
  return per_sample * m / k + sync;
}

double LiveJob::lr_scale_at(double m) const {
  if (l_.init_batch == 0) return 1.0;
  const double scale = m / static_cast<double>(l_.init_batch);
  // No noise scale yet: AdaScale's limit of a noise-dominated gradient, the linear scaling rule
  // (the same optimism as the efficiency of 1 it implies).
  if (!l_.noise_scale) return scale;
  // The noise scale B_noise = init_batch * var / sqr (app_model.h's GradStats): sqr = 1.
  const GradStats g{1.0, *l_.noise_scale / static_cast<double>(l_.init_batch)};
  return progress_gain(g, scale);
}

double LiveJob::goodput_at(int k, long m) const {
  const double t = step_time(k, static_cast<double>(m));
  if (t <= 0) return 0;
  // Samples a second times statistical efficiency (gain / scale): initial-batch samples a second.
  return static_cast<double>(m) / t * lr_scale_at(static_cast<double>(m)) /
         (static_cast<double>(m) / static_cast<double>(l_.init_batch));
}

LiveJob::Choice LiveJob::best(int k) const {
  const long held = l_.local * k;  // what the devices hold in one pass
  if (k < 1 || held == 0) return {};
  // Before a noise scale every batch looks free, and larger ones only through accumulation, which
  // pays only against a wait the noise scale has not yet been measured to be worth.
  if (!l_.noise_scale) return {held, goodput_at(k, held)};
  Choice c;
  auto consider = [&](long m) {
    const double g = goodput_at(k, m);
    if (g > c.goodput || (g == c.goodput && m > c.batch)) c = {m, g};  // a tie keeps the larger batch
  };
  // The multiples of k from the initial batch up: each while they lie within 2% of each other,
  // then steps of 2% (a max_batch of millions costs a few hundred evaluations a round, not
  // millions), then every multiple between the best one's neighbours (goodput rises, then falls).
  const long least = std::max<long>(k, (l_.init_batch + k - 1) / k * k);
  const long most = std::max(held, max_batch_ / k * k);
  std::vector<long> grid;
  for (long m = least; m <= most; m = std::max(m + k, static_cast<long>(static_cast<double>(m) * 1.02) / k * k))
    grid.push_back(m);
  if (grid.empty() || grid.back() != most) grid.push_back(most);
  size_t at = 0;
  for (size_t i = 0; i < grid.size(); ++i) {
    consider(grid[i]);
    if (c.batch == grid[i]) at = i;
  }
  const long lo = at > 0 ? grid[at - 1] : grid[at], hi = at + 1 < grid.size() ? grid[at + 1] : grid[at];
  const long step = std::max<long>(1, (hi - lo) / k / 512 + 1) * k;  // at most 512 more
  for (long m = lo + step; m < hi; m += step) consider(m);
  consider(held);
  return c;
}

long LiveJob::accumulate(int k) const {
  const long m = batch(k), held = l_.local * k;
  return held > 0 && m > held ? (m + held - 1) / held : 1;
}

long LiveJob::batch(int k) const {
  return best(k).batch;
}

double LiveJob::lr_scale(int k) const {
  if (l_.init_batch == 0 || k < 1) return 1.0;
  return lr_scale_at(static_cast<double>(batch(k)));
}

double LiveJob::throughput(int k) const {
  const long m = batch(k);
  const double t = step_time(k, static_cast<double>(m));
  return t > 0 ? static_cast<double>(m) / t : 0;
}

std::vector<double> LiveJob::goodput_table() const {
  std::vector<double> g(static_cast<size_t>(max_) + 1, 0.0);
  for (int k = 1; k <= max_; ++k) g[static_cast<size_t>(k)] = best(k).goodput;
  return g;
}

}  // namespace ember::sched::elastic
