// An elastic job as the daemon knows it: not Pollux's measured tables (app_model.h) but what the
// job itself reports while it runs (its "ember-progress" lines: global batch, steps per second,
// gradient noise scale). From those, the goodput it would have on k devices, the global batch and
// the learning-rate factor it gets there, for the allocator the simulator's goodput policy uses
// (allocate.h). docs/scheduler/elastic.md, "The daemon's elastic jobs", says what is modelled.
#pragma once

#include <map>
#include <optional>
#include <vector>

namespace ember::sched::elastic {

class LiveJob {
 public:
  LiveJob(int min, int max);

  // A report of the job running on `ranks` devices at global batch `batch`, taking `steps_per_s`
  // optimizer steps a second; its noise scale when it measured one (two ranks or more). The first
  // report fixes the per-device batch and the initial batch efficiency is relative to.
  void report(int ranks, long batch, double steps_per_s, std::optional<double> noise_scale);

  bool measured(int ranks) const { return samples_per_s_.count(ranks) > 0; }
  int most_held() const { return most_held_; }
  void held(int ranks);
  std::optional<double> noise_scale() const { return noise_; }
  int min() const { return min_; }
  int max() const { return max_; }

  // The global batch on k devices (the first report's per-device batch times k; 0 before it).
  long batch(int k) const;
  // AdaScale's factor at that batch: progress_gain of the noise scale (the batch's scale, the
  // linear scaling rule, while none is measured).
  double lr_scale(int k) const;
  // Samples a second on k devices: measured, else the nearest measured count's scaled linearly
  // (Pollux's optimism until a size has been tried). 0 before any report.
  double throughput(int k) const;
  // throughput x statistical efficiency (gain / scale), for k = 0..max (0 at k = 0 and below min).
  std::vector<double> goodput_table() const;

 private:
  double efficiency(int k) const;
  int min_, max_, most_held_ = 0;
  long local_ = 0, init_batch_ = 0;
  std::map<int, double> samples_per_s_;
  std::optional<double> noise_;
};

}  // namespace ember::sched::elastic
