// A data-parallel training job's measured behaviour, from Pollux's artifact (one folder of
// ../shared/data/pollux/traces): how long a step takes by placement and per-GPU batch
// (placements.csv, scalability.csv) and how training progresses at each global batch size with its
// gradient statistics (validation-B.csv). What the elastic simulator (elastic/simulator.h) runs a
// job on and what the goodput policy plans with. docs/scheduler/elastic.md says what each model
// is and how it differs from Pollux's simulator.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ember::sched::elastic {

// GPUs per node used by a job, one entry per node it spans (zeros are ignored).
using Shape = std::vector<int>;

struct StepTime {
  double step = 0;  // seconds of one optimiser step at this placement and per-GPU batch
  double sync = 0;  // of which gradient synchronisation (not repeated by accumulation steps)
};

// The gradient's squared norm and variance (per sample, at the job's initial batch): the noise
// scale B_noise = init_batch * var / sqr that statistical efficiency follows.
struct GradStats {
  double sqr = 0;
  double var = 0;
};

// How many training steps at the initial batch one step at `scale` = batch / init_batch is worth
// (McCandlish et al.'s gain (var + sqr) / (var / scale + sqr)): 1 at scale 1, at most `scale`.
double progress_gain(const GradStats& g, double scale);

// The per-GPU batch a job runs: `atomic` samples per pass, `accum` extra passes accumulated before
// each synchronisation. Its global batch on r GPUs is r * atomic * (accum + 1).
struct BatchConfig {
  int atomic = 0;
  int accum = 0;
  long global(int replicas) const { return static_cast<long>(replicas) * atomic * (accum + 1); }
};

struct AppLimits {
  int init_batch = 0;  // the smallest validated batch: efficiency is relative to it
  int max_batch = 0;   // the largest validated batch
  int min_local = 0;   // per-GPU batch range measured
  int max_local = 0;   // (memory bound)
  int epochs = 0;      // the measured run's length (a job is done after this many epochs)
};

class AppModel {
 public:
  // Reads folder `dir` (the app's name is its last component); ember::Error naming the file and
  // line for anything missing or malformed.
  static AppModel load(const std::string& dir);

  const std::string& name() const { return name_; }
  const AppLimits& limits() const { return limits_; }
  // Step time on `shape` at per-GPU batch `local` (clamped into the measured range): the measured
  // placement when there is one (linear in the batch), else interpolated across node and GPU
  // counts (elastic.md, "Throughput").
  StepTime step_time(const Shape& shape, double local) const;
  // Gradient statistics during epoch `epoch` (0-based) at global batch `batch`, linear between the
  // two validated batches around it. ember::Error outside [init_batch, max_batch] or past the run.
  GradStats grad_stats(double batch, int epoch) const;
  // Progress (steps at the initial batch) after `epoch` epochs: the least any validated batch
  // needed, so that an epoch is one pass over the data at every batch.
  double progress_at(int epoch) const;
  // Progress that completes the job: that of the whole measured run.
  double target_progress() const { return progress_at(limits_.epochs); }
  // The per-GPU configuration Pollux's simulator gives a rigid job of `batch` on `replicas` GPUs:
  // split into accumulation steps when the per-GPU batch exceeds max_local (and at least one on a
  // single GPU above the initial batch), capped at max_batch.
  BatchConfig rigid_config(int replicas, long batch) const;

  // The curve of one placement or (nodes, replicas) group: per-GPU batch -> times, sorted.
  struct Curve {
    std::vector<double> local;
    std::vector<StepTime> time;
    StepTime at(double b) const;
  };

 private:
  struct Validation {
    std::vector<double> progress;
    std::vector<GradStats> grad;
  };
  StepTime shape_time(int nodes, int replicas, double local) const;
  StepTime replicas_time(int nodes, int replicas, double local) const;
  void load_placements(const std::string& path);
  void load_scalability(const std::string& path);
  void load_validation(const std::string& path, int batch);

  std::string name_;
  AppLimits limits_;
  std::map<std::string, Curve> by_placement_;      // "24": two nodes, two and four GPUs
  std::map<std::pair<int, int>, Curve> by_shape_;  // (replicas, nodes) -> mean curve
  std::map<int, Validation> validation_;           // global batch -> per-epoch rows
  std::vector<int> measured_counts_;               // the GPU counts in by_shape_, sorted
};

// The id of a placement as the artifact's placements.csv spells it: the GPUs per node, zeros
// dropped, in the rotation that reads smallest ("42" and "24" are one placement: "24").
std::string placement_id(const Shape& shape);

// The apps of a traces folder (one sub-folder each), by name.
std::map<std::string, AppModel> load_apps(const std::string& traces_dir);

}  // namespace ember::sched::elastic
