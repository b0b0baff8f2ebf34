// Learning-rate schedules. Each one sets the "lr" of every parameter group of an optimizer, as
// torch.optim.lr_scheduler does: the constructor applies the epoch-0 rate, step() advances one
// epoch (or one iteration, for per-batch schedules such as OneCycleLR) and applies the rate for
// it, get_last_lr() returns the rates last applied. Rates come from closed forms of the epoch
// count, so a schedule restored from state_dict() continues exactly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "layers/optim/optimizer.h"

namespace ember::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  // "last_epoch", "base_lr.<g>", "last_lr.<g>" (and schedule-specific entries).
  virtual std::map<std::string, double> state_dict() const;
  virtual void load_state_dict(const std::map<std::string, double>& state);

 protected:
  // base_lrs: each group's "lr" at construction.
  explicit LRScheduler(Optimizer& optimizer);
  // Call at the end of the derived constructor (PyTorch's initial step to epoch 0).
  void initial_step();
  // The rate of group g at last_epoch_.
  virtual double lr_at(size_t group, int64_t epoch) const = 0;
  // Optional extra per-step work (OneCycleLR's momentum).
  virtual void on_step() {}

  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
};

// base_lr * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(size_t group, int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// base_lr * gamma^(number of milestones <= epoch)
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double lr_at(size_t group, int64_t epoch) const override;

 private:
  std::vector<int64_t> milestones_;
  double gamma_;
};

// base_lr * gamma^epoch
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double lr_at(size_t group, int64_t epoch) const override;

 private:
  double gamma_;
};

// Linear warmup, then cosine annealing (torch's LinearLR + CosineAnnealingLR chained):
//   epoch < warmup:  base * (start + (1 - start) * epoch / warmup)
//   else:            eta_min + (base - eta_min) * (1 + cos(pi * (epoch - warmup) / (t_max - warmup))) / 2
// With warmup_steps = 0 this is exactly torch.optim.lr_scheduler.CosineAnnealingLR (t_max counts
// epochs from 0; past t_max the cosine continues, as in PyTorch).
struct CosineAnnealingOptions {
  int64_t t_max = 0;  // epochs (or iterations) to the bottom of the cosine, warmup included
  double eta_min = 0.0;
  int64_t warmup_steps = 0;
  double warmup_start_factor = 0.0;
};
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, CosineAnnealingOptions options);
  CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min = 0.0)
      : CosineAnnealingLR(optimizer, CosineAnnealingOptions{.t_max = t_max, .eta_min = eta_min}) {}

 protected:
  double lr_at(size_t group, int64_t epoch) const override;

 private:
  CosineAnnealingOptions o_;
};

// The 1cycle policy (torch.optim.lr_scheduler.OneCycleLR, cosine annealing): from max_lr /
// div_factor up to max_lr over pct_start of total_steps, then down to initial / final_div_factor
// (three_phase: back to initial first, then down). With cycle_momentum, "momentum" (SGD,
// RMSprop) or "beta1" (Adam) cycles inversely between max_momentum and base_momentum. Stepping
// past total_steps is an error, as in PyTorch.
struct OneCycleOptions {
  int64_t total_steps = 0;
  double pct_start = 0.3;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
};
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, OneCycleOptions options);
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, OneCycleOptions options);

 protected:
  double lr_at(size_t group, int64_t epoch) const override;
  void on_step() override;

 private:
  enum class Level { Initial, Max, Min };
  struct Phase {
    double end_step;
    Level lr_from, lr_to;
    bool momentum_from_max, momentum_to_max;  // momentum runs between base and max
  };
  // Where `epoch` is in the phases: (phase index, fraction through it).
  std::pair<size_t, double> locate(int64_t epoch) const;
  double level(size_t group, Level l) const;
  OneCycleOptions o_;
  std::vector<double> initial_, max_, min_;
  std::vector<Phase> phases_;
  std::string momentum_key_;  // "momentum", "beta1" or empty
};

// Lowers the rate by `factor` when a metric has stopped improving for `patience` epochs
// (torch.optim.lr_scheduler.ReduceLROnPlateau). step(metric) once per epoch.
struct ReduceLROnPlateauOptions {
  enum class Mode { Min, Max } mode = Mode::Min;
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  enum class ThresholdMode { Rel, Abs } threshold_mode = ThresholdMode::Rel;
  int64_t cooldown = 0;
  double min_lr = 0.0;  // for every group, unless min_lrs is given
  std::vector<double> min_lrs = {};
  double eps = 1e-8;  // changes smaller than this are ignored
};
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_; }
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  bool is_better(double a) const;
  Optimizer& optimizer_;
  ReduceLROnPlateauOptions o_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = 0;
  double best_;
  int64_t num_bad_ = 0;
  int64_t cooldown_counter_ = 0;
};

}  // namespace ember::optim
