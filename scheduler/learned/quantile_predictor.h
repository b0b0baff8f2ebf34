// A duration predictor that is a small model trained with Ember while the trace runs: a quantile
// regressor over what a scheduler knows at submission. Its inputs are the history predictor's
// statistics of the job's four groups (scheduler/predict.h: the same queue and gang size, the
// same queue, the same gang size, every job), the gang size and the hour of the day; its outputs
// are quantiles of the log run time, trained with the pinball loss on the jobs that have
// finished so far. Training online, rather than shipping weights fitted to one week, is what keeps
// the no-future rule: a prediction reads only a model fitted to jobs that finished before it, on
// any trace, and there is no week the weights were tuned on.
//
// The network is an MLP (kQuantileInputs -> hidden -> kQuantiles, tanh) plus a linear skip. The
// skip starts with weight 1 on the history predictor's own answer and the MLP's output at zero,
// so until the first fit (and as a start for it) every quantile equals the history predictor's
// median; training learns a correction to it, warm-started at each refit with Adam's state kept.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "layers/linear.h"
#include "layers/module.h"
#include "layers/optim/adam.h"
#include "scheduler/predict.h"

namespace ember::sched::learned {

inline constexpr int kQuantileInputs = 20;
inline constexpr std::array<double, 5> kQuantileLevels = {0.1, 0.25, 0.5, 0.75, 0.9};
inline constexpr int kQuantiles = static_cast<int>(kQuantileLevels.size());

struct QuantileOptions {
  int refit = 256;         // finished jobs between fits (the first fit after as many)
  int steps = 40;          // Adam steps per fit
  int batch = 256;         // finished jobs per step, drawn from the memory
  int memory = 4096;       // the most recent finished jobs kept to train on
  int hidden = 16;         // MLP width
  double lr = 3e-3;        // Adam's learning rate
  double decay = 0;        // AdamW's decoupled weight decay of the MLP: pulls the correction towards zero
  double quantile = 0.5;   // which trained quantile a prediction is (one of kQuantileLevels)
  uint64_t seed = 1;       // the MLP's initial weights and the batches drawn
  HistoryOptions history;  // the statistics the inputs are made of
};

// The inputs of a job submitted at `f.submit`, from the history as it stands at `at` (>= the
// newest finish `history` was told of): kQuantileInputs floats, each squashed to about [-1, 2].
// Input 0 is the history predictor's log answer / 10 (the skip's starting point).
std::array<float, kQuantileInputs> quantile_inputs(HistoryPredictor& history, const SubmitFeatures& f, double at);

class QuantileNet : public nn::Module {
 public:
  QuantileNet(int hidden, uint64_t seed);
  // inputs [n, kQuantileInputs] -> [n, kQuantiles]: log(run time) / 10 per quantile level
  Tensor forward(const Tensor& inputs) override;
  std::string type_name() const override { return "QuantileNet"; }
  std::vector<Tensor> correction_parameters() const;  // the MLP's
  std::vector<Tensor> skip_parameters() const;

 private:
  std::shared_ptr<nn::Linear> l1_, out_, skip_;
};

// The pinball (quantile) loss of `pred` [n, kQuantiles] against `target` [n, 1], averaged:
// sum over levels t of max(t (y - q), (t - 1)(y - q)), differentiable through Ember's autograd.
Tensor pinball_loss(const Tensor& pred, const Tensor& target);

class QuantilePredictor final : public DurationPredictor {
 public:
  explicit QuantilePredictor(QuantileOptions opt = {});
  std::string name() const override { return "quantile"; }
  // The quantiles (seconds, ascending) the model gives a job submitted at f.submit, as it stands.
  std::array<double, kQuantiles> quantiles(const SubmitFeatures& f) { return quantiles(f, f.submit); }
  // The same from the history as it stands at `at` (a job asked about again while it runs).
  std::array<double, kQuantiles> quantiles(const SubmitFeatures& f, double at);
  int fits() const { return fits_; }
  // The mean pinball loss over the memory before and after the last fit (log seconds / 10).
  double loss_before() const { return loss_before_; }
  double loss_after() const { return loss_after_; }

 private:
  void learn(const SubmitFeatures& f, double run_time, double finish) override;
  double guess(const SubmitFeatures& f) override;
  // A job that outlived its prediction: the next higher quantile the model gives it, else the
  // history predictor's rule (the median of the group's longer runs).
  double guess_given(const SubmitFeatures& f, double now, double ran) override;
  std::array<double, kQuantiles> quantiles_of(const std::array<float, kQuantileInputs>& x);
  using Remembered = std::pair<std::array<float, kQuantileInputs>, float>;  // inputs, log(run) / 10
  void fit();
  Tensor loss_on(const std::vector<const Remembered*>& jobs);  // the pinball loss on those jobs
  double memory_loss();

  QuantileOptions opt_;
  int level_ = 2;  // index of opt_.quantile in kQuantileLevels
  HistoryPredictor history_;
  std::shared_ptr<QuantileNet> net_;
  std::unique_ptr<optim::Adam> adam_;
  std::mt19937_64 rng_;
  // Each job's inputs as they were at its submission, kept until it finishes (a finished job is
  // trained on what was known when it was predicted, not on what is known at its finish). Keyed
  // by queue, gang size and submission time; jobs alike in all three have the same inputs.
  std::unordered_multimap<std::string, std::array<float, kQuantileInputs>> pending_;
  std::deque<Remembered> memory_;
  int since_fit_ = 0, fits_ = 0;
  double loss_before_ = 0, loss_after_ = 0;
};

// `quantile` for make_predictor, from `--set quantile.KEY=V` (refit, steps, batch, memory, hidden,
// lr, decay, quantile, seed) and `history.KEY=V` for its statistics; unknown keys are errors.
std::unique_ptr<DurationPredictor> make_quantile_predictor(const PolicyParams& params);

}  // namespace ember::sched::learned
