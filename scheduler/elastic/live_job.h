// An elastic job as the daemon knows it: not Pollux's measured tables (app_model.h) but what the
// job itself reports while it runs (its "ember-progress" lines: global batch, steps per second,
// gradient noise scale, seconds a step waits for the gradients). From those, the goodput it would
// have on k devices at the best global batch for k, that batch and the learning-rate factor it
// gets there, for the allocator the simulator's goodput policy uses (allocate.h).
// docs/scheduler/elastic.md, "The daemon's elastic jobs", says what is modelled.
#pragma once

#include <map>
#include <optional>
#include <vector>

namespace ember::sched::elastic {

class LiveJob {
 public:
  // One device count's latest report.
  struct Measured {
    long batch = 0;     // the global batch it ran
    double step_s = 0;  // seconds an optimizer step took
    double sync_s = 0;  // of which waiting for the gradients after backward (0 on one device)
  };
  // What the reports taught, as a daemon keeps it across its own restarts (JobInfo's
  // ElasticLearned).
  struct Learned {
    long local = 0;              // the first report's per-device batch (0: none yet): the most a device runs
    long init_batch = 0;         // its global batch: efficiency and the learning-rate factor are relative to it
    std::map<int, Measured> at;  // by device count
    std::optional<double> noise_scale;
    int most_held = 0;
  };

  // `max_batch`: the largest global batch the job accepts, reached by gradient accumulation above
  // what its devices hold (0: none above that).
  LiveJob(int min, int max, long max_batch = 0);
  // Resumes from what an earlier daemon learned. Entries that could not have come from reports
  // (a count outside 1..max, a time not finite and positive, a batch below the device count) are
  // left out, so a damaged record costs what it held, never a wrong batch or rate.
  LiveJob(int min, int max, long max_batch, const Learned& learned);
  const Learned& learned() const { return l_; }

  // A report of the job running on `ranks` devices at global batch `batch`, taking `steps_per_s`
  // optimizer steps a second, `sync_s` of each waiting for gradients (none: 0); its noise scale
  // when it measured one (two ranks or more). The first report fixes the per-device batch and
  // the initial batch efficiency is relative to.
  void report(int ranks, long batch, double steps_per_s, std::optional<double> noise_scale,
              std::optional<double> sync_s = std::nullopt);

  bool measured(int ranks) const { return l_.at.count(ranks) > 0; }
  int most_held() const { return l_.most_held; }
  void held(int ranks);
  std::optional<double> noise_scale() const { return l_.noise_scale; }
  int min() const { return min_; }
  int max() const { return max_; }

  // The global batch on k devices (0 before the first report): the first run's per-device batch
  // times k until a noise scale is measured; then, among the multiples of k from the initial
  // batch up to that (up to max_batch when it is larger), the one of most goodput (a smaller
  // batch gives up throughput for statistical efficiency; a device never runs more than the first
  // run's per-device batch at once, the one batch known to fit: a larger one is accumulated).
  long batch(int k) const;
  // The passes a step at batch(k) takes on k devices: 1 up to the first run's per-device batch
  // times k, then as many as keep each pass within it.
  long accumulate(int k) const;
  // AdaScale's factor at that batch: progress_gain of the noise scale (the batch's scale, the
  // linear scaling rule, while none is measured).
  double lr_scale(int k) const;
  // Samples a second on k devices at batch(k). 0 before any report.
  double throughput(int k) const;
  // throughput x statistical efficiency (gain / scale), for k = 0..max (0 at k = 0 and below min).
  std::vector<double> goodput_table() const;

 private:
  // Seconds a step of global batch `m` takes on k devices: the per-sample compute time and the
  // synchronisation of the measured count k, else of the nearest measured count below k (above
  // when there is none), its compute per device scaled to m / k; one device synchronises nothing,
  // and a count above one measured only on one is assumed to (Pollux's optimism until a size has
  // been tried). 0 before any report.
  double step_time(int k, double m) const;
  double lr_scale_at(double m) const;
  double goodput_at(int k, long m) const;
  // batch(k) and its goodput: the search, done once for both.
  struct Choice {
    long batch = 0;
    double goodput = 0;
  };
  Choice best(int k) const;
  int min_, max_;
  long max_batch_;
  Learned l_;
};

}  // namespace ember::sched::elastic
